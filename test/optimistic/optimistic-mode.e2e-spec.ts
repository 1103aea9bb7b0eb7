import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { Controller, Post } from '@nestjs/common';
import {
  Idempotent,
  IdempotencyInFlightError,
  IdempotencyModule,
  IdempotencyService,
  IdempotentOptions,
  InMemoryIdempotencyRepository,
  ProblemType,
} from 'nestjs-dynamodb-idempotency';
import { post, startApp, TestApp } from '../support/app';
import { localClient, uniqueTableName } from '../support/dynalite';
import { describeOnDynamoDbLocal, ENGINES, startStore } from '../support/engines';
import { startFaultProxy } from '../support/fault-proxy';
import { withInMemoryService } from '../support/service';
import { createIdempotencyTable, createTableWithKey, scanTable } from '../support/table';
import { OptimisticRuns, optimisticModule, OrderBody } from './optimistic.fixture';

/** Two instances (replay cache off), their DynamoDB calls seen at the wire by a proxy. */
async function startInstances(endpoint: string, prefix: string) {
  const client = localClient(endpoint);
  const proxy = await startFaultProxy(endpoint);
  const tableName = uniqueTableName(prefix);
  const ordersTable = uniqueTableName(`${prefix}_orders`);
  await createIdempotencyTable(client, tableName);
  await createTableWithKey(client, ordersTable);
  const module = () => optimisticModule(localClient(proxy.endpoint), tableName, ordersTable);
  const [a, b] = [
    await startApp('express', module(), { realTime: true }),
    await startApp('express', module(), { realTime: true }),
  ];
  const orders = async () => {
    const { Items = [] } = await client.send(new ScanCommand({ TableName: ordersTable, ConsistentRead: true }));
    return Items.map((item) => unmarshall(item) as { id: string; item: string });
  };
  return {
    client,
    proxy,
    tableName,
    a,
    b,
    orders,
    runs: (app: TestApp) => app.get(OptimisticRuns),
    stop: async () => {
      await a.close();
      await b.close();
      await proxy.stop();
      client.destroy();
    },
  };
}

describe.each(ENGINES)('optimistic mode on %s', (engine) => {
  let store: { endpoint: string; stop(): Promise<void> };
  let s: Awaited<ReturnType<typeof startInstances>>;
  let keys = 0;
  const newKey = () => `optimistic-${engine}-${++keys}`;
  const quote = (app: TestApp, key: string, body: object = { item: 'book' }) =>
    post(`${app.url}/quotes`, body, { 'Idempotency-Key': key });

  beforeAll(async () => {
    store = await startStore(engine);
    s = await startInstances(store.endpoint, `optimistic_${engine.replace('-', '_')}`);
  });
  afterAll(async () => {
    await s.stop();
    await store.stop();
  });

  it('sends a first request as one conditional PutItem (no claim), and a replay from another instance as one', async () => {
    const key = newKey();
    s.proxy.operations.length = 0;
    const first = await quote(s.a, key);
    expect(first.status).toBe(201);
    expect(s.proxy.operations).toEqual(['PutItem']);

    const records = await scanTable(s.client, s.tableName);
    const { quoteId } = JSON.parse(first.text);
    const record = records.find((r) => JSON.parse(r.item.response ?? '{}').body?.quoteId === quoteId);
    expect(record?.item).toMatchObject({ status: 'COMPLETED', claim_token: JSON.parse(first.text).claimToken });

    // Another instance runs the handler, its put is refused, and it answers with the stored outcome.
    s.proxy.operations.length = 0;
    const again = await quote(s.b, key);
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(s.proxy.operations).toEqual(engine === 'dynalite' ? ['PutItem', 'GetItem'] : ['PutItem']);
  });

  it('a duplicate of a completed request gets the stored response even when its own run fails transiently', async () => {
    const key = newKey();
    const first = await quote(s.a, key);
    expect(first.status).toBe(201);
    s.runs(s.b).quoteFailures = 1; // the retry lands on b, where the provider answers 502
    const runs = s.runs(s.b).quotes;
    const retry = await quote(s.b, key);
    expect(s.runs(s.b).quotes).toBe(runs + 1); // it ran (optimistic), failed, then found the stored answer
    expect(retry.status).toBe(201);
    expect(retry.text).toBe(first.text);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    // A first request whose run fails finds nothing stored: the client gets the error, and may retry.
    const other = newKey();
    s.runs(s.a).quoteFailures = 1;
    expect((await quote(s.a, other)).status).toBe(502);
    expect((await quote(s.a, other)).status).toBe(201);
  });

  it("a losing run's own headers never go out with the stored answer: a replay carries the stored headers only", async () => {
    const key = newKey();
    const first = await quote(s.a, key);
    const { quoteId } = JSON.parse(first.text);
    expect(first.headers.get('x-quote-id')).toBe(quoteId);
    for (const retry of [await quote(s.b, key), await quote(s.a, key)]) {
      expect(retry.text).toBe(first.text);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.headers.get('content-type')).toMatch(/application\/json/);
      // Not in the replayed allow-list: none of the losing run's own values (nor the winner's) are sent. Express
      // computes a weak ETag of the body it sends; the run's own strong one is gone.
      expect([retry.headers.get('x-quote-id'), retry.headers.get('set-cookie')]).toEqual([null, null]);
      expect(retry.headers.get('etag') ?? 'W/').toMatch(/^W\//);
    }
  });

  it('answers a different body under the same key with 422, and stores nothing of it', async () => {
    const key = newKey();
    const first = await quote(s.a, key, { item: 'book' });
    const other = await quote(s.b, key, { item: 'pen' });
    expect(other.status).toBe(422);
    expect(JSON.parse(other.text)).toMatchObject({ type: ProblemType.fingerprintMismatch });
    expect((await quote(s.a, key, { item: 'book' })).text).toBe(first.text);
  });

  it('answers a missing key with 400, the handler not run', async () => {
    const runs = s.runs(s.a).quotes;
    const response = await post(`${s.a.url}/quotes`, { item: 'book' });
    expect(response.status).toBe(400);
    expect(s.runs(s.a).quotes).toBe(runs);
  });

  it('concurrent first requests may each run, and every caller gets the one stored answer: no 409, no 5xx', async () => {
    const key = newKey();
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => quote(i % 2 ? s.a : s.b, key, { item: 'book', delayMs: 50 })),
    );
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 201));
    expect(new Set(answers.map((answer) => answer.text)).size).toBe(1);
    const records = (await scanTable(s.client, s.tableName)).filter(
      (r) => JSON.parse(r.item.response ?? '{}').body?.quoteId === JSON.parse(answers[0].text).quoteId,
    );
    expect(records).toHaveLength(1);
  });

  if (engine === 'dynalite') {
    it('refuses commitWith on a store without transactions, as the lease mode does: 500, nothing stored', async () => {
      const key = newKey();
      const response = await post(`${s.a.url}/orders`, { item: 'book' }, { 'Idempotency-Key': key });
      expect(response.status).toBe(500);
      expect(await s.orders()).toEqual([]);
      const retry = await post(`${s.b.url}/orders`, { item: 'book' }, { 'Idempotency-Key': key });
      expect(retry.status).toBe(500); // nothing was stored: the retry runs again, and is refused again
    });
  }
});

describeOnDynamoDbLocal('optimistic mode with commitWith on DynamoDB Local', () => {
  let s: Awaited<ReturnType<typeof startInstances>>;
  let keys = 0;
  const newKey = () => `optimistic-commit-${++keys}`;
  const order = (app: TestApp, key: string, body: OrderBody) =>
    post(`${app.url}/orders`, body, { 'Idempotency-Key': key });

  beforeAll(async () => {
    const store = await startStore('dynamodb-local');
    s = await startInstances(store.endpoint, 'optimistic_commit');
    // Both instances have asked whether the store has transactions (at startup): the first request is one call.
    await Promise.all([s.a.get(IdempotencyService).commitSupported(), s.b.get(IdempotencyService).commitSupported()]);
  });
  afterAll(() => s.stop());

  it('sends a first request as one TransactWriteItems: the order and the COMPLETED record together', async () => {
    const key = newKey();
    s.proxy.operations.length = 0;
    const first = await order(s.a, key, { item: key });
    expect(first.status).toBe(201);
    expect(s.proxy.operations).toEqual(['TransactWriteItems']);
    expect((await s.orders()).filter((o) => o.item === key)).toEqual([JSON.parse(first.text)]);
  });

  it('50 concurrent duplicates over two instances: one order, 50 identical bodies, no 5xx', async () => {
    const key = newKey();
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => order(i % 2 ? s.a : s.b, key, { item: key, delayMs: 100 })),
    );
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 201));
    expect(new Set(answers.map((answer) => answer.text)).size).toBe(1);
    const orders = (await s.orders()).filter((o) => o.item === key);
    expect(orders).toEqual([JSON.parse(answers[0].text)]);
    expect(answers.filter((answer) => answer.headers.get('idempotent-replayed') === 'true')).toHaveLength(49);
  });

  it('a transaction that committed while its answers were lost (past the SDK retries) is answered, not applied twice', async () => {
    const key = newKey();
    s.proxy.dropAnswersOf = 'TransactWriteItems';
    s.proxy.dropAnswers = 4; // the SDK's 3 attempts, then the module's own retry once: each lands, no answer arrives
    try {
      const first = await order(s.a, key, { item: key });
      expect(first.status).toBe(201);
      expect((await s.orders()).filter((o) => o.item === key)).toEqual([JSON.parse(first.text)]);
      expect((await order(s.b, key, { item: key })).text).toBe(first.text);
    } finally {
      s.proxy.dropAnswers = 0;
      s.proxy.dropAnswersOf = undefined;
    }
  });

  it('answers 409 commit-rejected when a write of the handler fails its condition, and writes nothing', async () => {
    const key = newKey();
    const refused = await order(s.a, key, { item: key, refused: true });
    expect(refused.status).toBe(409);
    expect(JSON.parse(refused.text)).toMatchObject({ type: ProblemType.commitRejected });
    expect((await s.orders()).filter((o) => o.item === key)).toEqual([]);
    expect((await scanTable(s.client, s.tableName)).filter((r) => r.item.response?.includes(key))).toEqual([]);
    // Nothing was stored: the same key can succeed once the cause is gone.
    expect((await order(s.b, key, { item: key, refused: true })).status).toBe(409);
  });

  it('stores a final error (402) and replays it; its writes are never committed', async () => {
    const key = newKey();
    const declined = await order(s.a, key, { item: key, declined: true });
    expect(declined.status).toBe(402);
    const runs = s.runs(s.b).orders;
    const again = await order(s.b, key, { item: key, declined: true });
    expect(again.status).toBe(402);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(s.runs(s.b).orders).toBe(runs + 1); // optimistic: the duplicate ran, then found the stored answer
    expect((await s.orders()).filter((o) => o.item === key)).toEqual([]);
  });
});

describe('optimistic mode for functions and its settings', () => {
  it('IdempotencyService.execute({ mode: "optimistic" }): a duplicate runs the function, then gets the first stored result', async () => {
    await withInMemoryService(async (service) => {
      let runs = 0;
      const charge = () =>
        service.execute({ operation: 'charge', key: 'm-1', mode: 'optimistic' }, async () => ({ run: ++runs }));
      expect(await charge()).toEqual({ run: 1 });
      expect(await charge()).toEqual({ run: 1 });
      expect(runs).toBe(2);
    });
  });

  it('a duplicate that finds a lease-mode call still running is in flight (with a retry delay); the lease-mode outcome is the one stored', async () => {
    await withInMemoryService(async (service) => {
      let release!: () => void;
      const running = service.execute(
        { operation: 'charge', key: 'm-2' },
        () => new Promise((r) => (release = () => r('lease'))),
      );
      await new Promise((resolve) => setImmediate(resolve)); // the lease-mode call holds its claim
      const duplicate = service.execute(
        { operation: 'charge', key: 'm-2', mode: 'optimistic' },
        async () => 'optimistic',
      );
      await expect(duplicate).rejects.toBeInstanceOf(IdempotencyInFlightError);
      await expect(duplicate).rejects.toMatchObject({ retryAfterSeconds: expect.any(Number) });
      release();
      expect(await running).toBe('lease');
      expect(await service.execute({ operation: 'charge', key: 'm-2', mode: 'optimistic' }, async () => 'again')).toBe(
        'lease',
      );
    });
  });

  it.each([
    [{ mode: 'eager' }, "idempotency option mode must be 'lease' or 'optimistic', got \"eager\""],
    [{ mode: 'optimistic', waitMs: 500 }, "idempotency option waitMs has no effect with mode 'optimistic'"],
  ])('refuses %j at startup', async (options, message) => {
    @Controller('refused')
    class RefusedController {
      @Post()
      @Idempotent(options as IdempotentOptions)
      create() {
        return {};
      }
    }
    await expect(
      startApp('express', {
        imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository() })],
        controllers: [RefusedController],
      }),
    ).rejects.toThrow(message);
  });
});
