import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Body, Controller, Param, Post, Req } from '@nestjs/common';
import { Idempotent, IdempotencyModule, ProblemType } from 'nestjs-dynamodb-idempotency';
import { Platform, PLATFORMS, post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { CapturedLogs } from '../support/logs';
import { RunsByKey } from '../support/runs-by-key';
import { createIdempotencyTable, scanTable } from '../support/table';

interface Payment {
  amount: number;
  currency: string;
  sentAt?: string;
}

/** Routes that choose their fingerprint: what counts is the amount and currency, not when the client sent it. */
@Controller('chosen')
class ChosenFingerprintController {
  constructor(private readonly runs: RunsByKey) {}

  @Post('payments/:account')
  @Idempotent({ fingerprint: ({ body }) => ({ amount: body.amount, currency: body.currency }) })
  pay(@Body() body: Payment, @Param('account') account: string, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { paid: body.amount, account, sentAt: body.sentAt };
  }

  @Post('throws')
  @Idempotent({
    fingerprint: () => {
      throw new Error('the fingerprint function broke');
    },
  })
  throws(@Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { ran: true };
  }

  @Post('promise')
  @Idempotent({ fingerprint: async ({ body }) => body })
  promise(@Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { ran: true };
  }

  @Post('bigint')
  @Idempotent({ fingerprint: ({ body }) => ({ amount: BigInt(body.amount) }) })
  bigint(@Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { ran: true };
  }

  @Post('set')
  @Idempotent({ fingerprint: ({ body }) => ({ items: new Set(body.items) }) })
  set(@Body() body: { items: string[] }, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { ordered: body.items };
  }

  @Post('map')
  @Idempotent({ fingerprint: ({ body }) => new Map(Object.entries(body)) })
  map(@Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { ran: true };
  }

  @Post('nan')
  // price is absent from the requests: NaN
  @Idempotent({ fingerprint: ({ body }) => ({ price: Number(body.price) }) })
  nan(@Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { ran: true };
  }

  @Post('date')
  @Idempotent({ fingerprint: ({ body }) => ({ at: new Date(body.at) }) })
  date(@Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { ran: true };
  }

  @Post('nothing')
  @Idempotent({ fingerprint: () => undefined })
  nothing(@Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { ran: true };
  }
}

/** `@Idempotent({ fingerprint })` on Express and Fastify, against dynalite with the replay cache off. */
describe.each(PLATFORMS)('a route that chooses its fingerprint, on %s', (platform: Platform) => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let tableName: string;
  let app: TestApp;
  let keys = 0;
  const newKey = () => `chosen-${platform}-${++keys}`;
  const pay = (key: string, body: Payment, account = 'acc-1') =>
    post(`${app.url}/chosen/payments/${account}`, body, { 'Idempotency-Key': key });

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    tableName = uniqueTableName('chosen');
    await createIdempotencyTable(client, tableName);
    app = await startApp(platform, {
      imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false } })],
      controllers: [ChosenFingerprintController],
      providers: [RunsByKey],
    });
  });
  afterAll(async () => {
    await app.close();
    await dynamo.stop();
  });

  it('replays a retry that differs only in what the function leaves out (sentAt), with the first answer', async () => {
    const key = newKey();
    const first = await pay(key, { amount: 10, currency: 'EUR', sentAt: '2026-12-04T10:00:00Z' });
    const retry = await pay(key, { currency: 'EUR', amount: 10, sentAt: '2026-12-04T10:00:05Z' });
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text); // the first sentAt: the stored answer
    expect(RunsByKey.of(key)).toBe(1);
  });

  it('answers 422 to what the function keeps (another amount or currency)', async () => {
    const key = newKey();
    await pay(key, { amount: 10, currency: 'EUR' });
    for (const other of [
      { amount: 11, currency: 'EUR' },
      { amount: 10, currency: 'USD' },
    ]) {
      const response = await pay(key, other);
      expect(response.status).toBe(422);
      expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.fingerprintMismatch });
    }
    expect(RunsByKey.of(key)).toBe(1);
  });

  it('leaves out what the function leaves out, path parameters too: another account under the same key gets the first answer', async () => {
    const key = newKey();
    await pay(key, { amount: 10, currency: 'EUR' }, 'acc-1');
    // The function left the path parameter out: the account no longer tells the two apart.
    const other = await pay(key, { amount: 10, currency: 'EUR' }, 'acc-2');
    expect(other.headers.get('idempotent-replayed')).toBe('true');
    expect(JSON.parse(other.text)).toMatchObject({ account: 'acc-1' });
  });

  it('never lets two different values share a fingerprint: an order of plum never gets the answer of apple and pear', async () => {
    const key = newKey();
    const first = await post(`${app.url}/chosen/set`, { items: ['apple', 'pear'] }, { 'Idempotency-Key': key });
    const other = await post(`${app.url}/chosen/set`, { items: ['plum'] }, { 'Idempotency-Key': key });
    for (const response of [first, other]) {
      expect(response.status).toBe(500);
      expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.fingerprintFailed });
    }
    expect(other.text).not.toContain('apple');
    expect(RunsByKey.of(key)).toBe(0);
  });

  it.each([
    ['throws', 'the fingerprint function broke'],
    ['promise', 'it returned a promise'],
    ['bigint', 'BigInt'],
    ['nothing', 'it returned undefined'],
    ['set', 'holds a Set'],
    ['map', 'holds a Map'],
    ['nan', 'holds NaN'],
    ['date', 'holds an invalid Date'],
  ])(
    'a function that fails (%s) answers 500 fingerprint-failed, logged with the route; nothing is claimed, the handler does not run',
    async (route, why) => {
      const logs = new CapturedLogs();
      logs.start();
      try {
        const key = newKey();
        const response = await post(`${app.url}/chosen/${route}`, { amount: 1 }, { 'Idempotency-Key': key });
        expect(response.status).toBe(500);
        expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.fingerprintFailed, status: 500 });
        expect(RunsByKey.of(key)).toBe(0);
        const logged = JSON.stringify(logs.at('error'));
        expect(logged).toContain('fingerprint-failed');
        expect(logged).toContain(`POST /chosen/${route}`);
        expect(logged).toContain(why);
      } finally {
        logs.stop();
      }
      const records = await scanTable(client, tableName);
      expect(records.filter((item) => JSON.stringify(item).includes(`/chosen/${route}`))).toEqual([]);
    },
  );
});
