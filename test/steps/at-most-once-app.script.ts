/**
 * One app instance in a process of its own (started by at-most-once.e2e-spec.ts with DYNAMODB_ENDPOINT,
 * IDEMPOTENCY_TABLE and EFFECTS_FILE), whose handler sends a mail through a relay that takes no keys: an at-most-once
 * step. The relay is a file: sending appends `<to> <key> <pid>` to EFFECTS_FILE. `POST /mail` has no probe;
 * `POST /mail/probed` asks the relay's file whether a mail with the step's key went out. CRASH=before-send or
 * CRASH=after-send SIGKILLs this process inside the step, before or after the relay took the mail. The module runs on
 * its defaults but for a 2 s lease. Tells its URL over IPC.
 */
import 'reflect-metadata';
import { appendFileSync, readFileSync } from 'node:fs';
import { Body, Controller, Post } from '@nestjs/common';
import { Idempotent, IdempotencyContext, StepInfo } from 'nestjs-dynamodb-idempotency';
import { serveJobs } from '../support/jobs-app';

const { EFFECTS_FILE, CRASH } = process.env;

/** The relay: it sends, and it can list what it sent (by the key each mail carried). */
const relay = {
  send(to: string, key: string): { sentBy: number } {
    if (CRASH === 'before-send') process.kill(process.pid, 'SIGKILL');
    appendFileSync(EFFECTS_FILE!, `${to} ${key} ${process.pid}\n`);
    if (CRASH === 'after-send') process.kill(process.pid, 'SIGKILL');
    return { sentBy: process.pid };
  },
  sent(key: string): { sentBy: number } | undefined {
    const line = readFileSync(EFFECTS_FILE!, { encoding: 'utf8', flag: 'a+' })
      .split('\n')
      .find((each) => each.split(' ')[1] === key);
    return line === undefined ? undefined : { sentBy: Number(line.split(' ')[2]) };
  },
};

@Controller('mail')
class MailController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  @Post()
  @Idempotent()
  async send(@Body() { to }: { to: string }) {
    const sent = await this.idempotency.step('send', ({ key }) => relay.send(to, key), { semantics: 'at-most-once' });
    return { to, ...sent, answeredBy: process.pid };
  }

  @Post('probed')
  @Idempotent()
  async sendProbed(@Body() { to }: { to: string }) {
    const attempts: number[] = [];
    const sent = await this.idempotency.step(
      'send',
      ({ key, attempt }) => {
        attempts.push(attempt);
        return relay.send(to, key);
      },
      { semantics: 'at-most-once', probe: ({ key }: StepInfo) => relay.sent(key) },
    );
    return { to, ...sent, attempts, answeredBy: process.pid };
  }
}

void serveJobs(MailController);
