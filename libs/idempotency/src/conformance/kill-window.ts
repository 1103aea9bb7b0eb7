import { ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { Answer, describe, fetchAnswer, sameAnswer, TargetError } from './http-target';
import { retried, Rung, ScenarioContext } from './scenarios';

const READY_TIMEOUT_MS = 60_000;

/** The server under test as a process the kit starts (`--start`) and SIGKILLs, its whole process group at once. */
export class ServerProcess {
  private child?: ChildProcess;
  private exited?: Promise<void>;
  private stderr = '';

  constructor(
    private readonly command: string,
    private readonly readyUrl: string,
  ) {}

  get running(): boolean {
    return this.child !== undefined;
  }

  /** Starts the command and waits until the ready URL answers (any status); the command's exit before that throws. */
  async start(): Promise<void> {
    this.stderr = '';
    const child = spawn(this.command, { shell: true, detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (chunk: Buffer) => (this.stderr = (this.stderr + chunk.toString()).slice(-2000)));
    let gone = false;
    this.exited = new Promise((resolve) => child.once('exit', () => ((gone = true), resolve())));
    this.child = child;
    // The kit stopped (Ctrl-C, an uncaught error): the server it started does not outlive it.
    process.once('exit', this.orphaned);
    const until = Date.now() + READY_TIMEOUT_MS;
    while (Date.now() < until) {
      if (gone) break;
      const answer = await fetchAnswer(this.readyUrl, { signal: AbortSignal.timeout(2000) });
      if (answer.status !== 0) return;
      await sleep(50);
    }
    await this.kill();
    throw new TargetError(
      `--start ${JSON.stringify(this.command)} ${gone ? 'exited' : 'did not answer'} before ${this.readyUrl} answered` +
        (this.stderr ? `; its stderr ended with:\n${this.stderr}` : ''),
    );
  }

  /** SIGKILLs the process group: the server gets no chance to finish anything. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    process.off('exit', this.orphaned);
    killGroup(child);
    await this.exited;
  }

  private readonly orphaned = () => this.child && killGroup(this.child);
}

function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

/**
 * The kill window: at each delay of the ladder, a request with a new key, the server SIGKILLed that long after it was
 * sent, started again, and the request retried with the same key until it gets an answer (a 409, a 5xx or no answer
 * is retried, as a client would). Then the effect count and one more retry judge the rung: `once` (one effect, one
 * answer), `none` (no effect, no success), `twice` (two effects or more) or `torn` (an answer without its effect, an
 * effect without its answer, or answers that differ).
 */
export async function killWindow(context: ScenarioContext, server: ServerProcess): Promise<Rung[]> {
  const { target, options } = context;
  const rungs: Rung[] = [];
  for (const delayMs of options.killDelays) {
    if (!server.running) await server.start();
    const key = context.key();
    const sending = target.send({ key });
    await sleep(delayMs);
    await server.kill();
    const before = await sending;
    await server.start();
    const answer = await retried(before, () => target.send({ key }), options.patienceMs, unsettled, 100);
    if (unsettled(answer)) {
      rungs.push({ delayMs, verdict: 'unanswered', detail: `no answer within --patience ${options.patienceMs} ms` });
      continue;
    }
    const again = await target.send({ key });
    const effects = await target.effects(key);
    rungs.push({ delayMs, effects, answer, ...judge(effects, before, answer, again) });
  }
  await server.kill();
  return rungs;
}

/** Whether a client retries this answer: a 409, a 5xx or no answer (the server is still starting). */
const unsettled = (answer: Answer) => answer.status === 0 || answer.status === 409 || answer.status >= 500;

function judge(
  effects: number | undefined,
  before: Answer,
  answer: Answer,
  again: Answer,
): Pick<Rung, 'verdict' | 'detail'> {
  const success = answer.status >= 200 && answer.status < 300;
  const seen = `${effects ?? '?'} effect(s), answered ${describe(answer)}`;
  if (effects === undefined) return { verdict: 'torn', detail: `no effect count: give --effects-url (${seen})` };
  if (effects >= 2) return { verdict: 'twice', detail: seen };
  if (!sameAnswer(answer, again)) return { verdict: 'torn', detail: `${seen}, then ${describe(again)}` };
  if (before.status >= 200 && before.status < 300 && !sameAnswer(before, answer))
    return { verdict: 'torn', detail: `answered ${describe(before)} before the kill, then ${describe(answer)}` };
  if (effects === 1 && success) return { verdict: 'once', detail: seen };
  if (effects === 0 && !success) return { verdict: 'none', detail: seen };
  return {
    verdict: 'torn',
    detail: effects === 0 ? `an answer without its effect: ${seen}` : `an effect without its answer: ${seen}`,
  };
}
