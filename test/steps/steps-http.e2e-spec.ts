import { Body, Controller, InternalServerErrorException, Post } from '@nestjs/common';
import { IdempotencyContext, Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';

/** What the routes' steps did, by the request's `id`: how often each step's function ran, with which attempt. */
class Effects {
  static readonly ran = new Map<string, string[]>();
  static note(id: string, what: string): void {
    Effects.ran.set(id, [...(Effects.ran.get(id) ?? []), what]);
  }
}

@Controller('transfers')
class TransfersController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  /** A transfer in two steps; `failAfterDebit` answers a 500 (not final) after the first step, once. */
  @Post()
  @Idempotent()
  async transfer(@Body() body: { id: string; failAfterDebit?: boolean }) {
    const debit = await this.idempotency.step('debit', ({ attempt }) => {
      Effects.note(body.id, `debit#${attempt}`);
      return { ledgerId: `ledger-${body.id}`, at: new Date('2026-12-04T12:00:00.000Z') };
    });
    if (body.failAfterDebit && !Effects.ran.get(body.id)?.includes('failed')) {
      Effects.note(body.id, 'failed');
      throw new InternalServerErrorException('the bank timed out');
    }
    const credit = await this.idempotency.step('credit', ({ attempt }) => {
      Effects.note(body.id, `credit#${attempt}`);
      return { creditId: `credit-${body.id}` };
    });
    return { ledgerId: debit.ledgerId, debitedAt: debit.at.toISOString(), creditId: credit.creditId };
  }

  /** The key is optional: without one, the steps run and nothing is recorded. */
  @Post('optional')
  @Idempotent({ required: false })
  async optional(@Body() body: { id: string }) {
    return this.idempotency.step('debit', ({ key, attempt }) => {
      Effects.note(body.id, `debit#${attempt}`);
      return { key };
    });
  }
}

/** Steps on an `@Idempotent()` HTTP route, on dynalite: a 500 after the first step, then the retry resumes. */
describe('steps on an HTTP route', () => {
  let dynamo: Dynalite;
  let test: TestApp;
  beforeAll(async () => {
    dynamo = await startDynalite();
    const tableName = uniqueTableName('steps_http');
    await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
    test = await startApp('express', {
      imports: [
        IdempotencyModule.forRoot({
          client: localClient(dynamo.endpoint),
          tableName,
          replayCache: { enabled: false },
        }),
      ],
      controllers: [TransfersController],
    });
  });
  afterAll(async () => {
    await test.close();
    await dynamo.stop();
  });

  it('answers the 500 of the first run, then resumes: the debit is not run again and comes back as a Date', async () => {
    const body = { id: 't-1', failAfterDebit: true };
    const first = await post(`${test.url}/transfers`, body, { 'Idempotency-Key': 'transfer-1' });
    expect(first.status).toBe(500);
    const retry = await post(`${test.url}/transfers`, body, { 'Idempotency-Key': 'transfer-1' });
    expect(retry.status).toBe(201);
    expect(JSON.parse(retry.text)).toEqual({
      ledgerId: 'ledger-t-1',
      debitedAt: '2026-12-04T12:00:00.000Z',
      creditId: 'credit-t-1',
    });
    expect(Effects.ran.get('t-1')).toEqual(['debit#1', 'failed', 'credit#1']);
    const replay = await post(`${test.url}/transfers`, body, { 'Idempotency-Key': 'transfer-1' });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(retry.text);
    expect(Effects.ran.get('t-1')).toHaveLength(3);
  });

  it('runs the steps of a request without a key on an optional route, recording nothing', async () => {
    const first = await post(`${test.url}/transfers/optional`, { id: 'o-1' });
    const second = await post(`${test.url}/transfers/optional`, { id: 'o-1' });
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(Effects.ran.get('o-1')).toEqual(['debit#1', 'debit#1']);
    expect(JSON.parse(first.text).key).not.toBe(JSON.parse(second.text).key);
  });
});
