import { DeleteItemCommand, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import {
  DynamoDbIdempotencyRepository,
  IdempotencyContext,
  IdempotencyService,
  InMemoryIdempotencyRepository,
  ProblemType,
} from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { runTableCli } from '../../libs/idempotency/src/cli/run-cli';
import { post, startApp, TestApp } from '../support/app';
import { localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { testClock } from '../support/clock';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { createIdempotencyTable, createTableWithKey, scanTable } from '../support/table';
import { ShopRuns, shopModule } from './shop.fixture';

const until = async (condition: () => unknown) => {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
};

describeOnDynamoDbLocal('commitWith on DynamoDB Local', () => {
  let client: DynamoDBClient;
  let proxy: FaultProxy;
  let tableName: string;
  let ordersTable: string;
  let test: TestApp;
  let ids = 0;
  const newId = () => `order-${++ids}`;
  const shop = () => test.get(ShopRuns);
  const order = async (id: string) =>
    (await client.send(new GetItemCommand({ TableName: ordersTable, Key: { id: { S: id } }, ConsistentRead: true })))
      .Item;
  const keyItem = async (key: string) => {
    const pk = recordKey('POST /shop/orders/:id', undefined, key);
    const { Item } = await client.send(
      new GetItemCommand({ TableName: tableName, Key: { pk: { S: pk } }, ConsistentRead: true }),
    );
    return Item && unmarshall(Item);
  };

  beforeAll(async () => {
    const { endpoint } = await startStore('dynamodb-local');
    client = localClient(endpoint);
    proxy = await startFaultProxy(endpoint);
    tableName = uniqueTableName();
    ordersTable = uniqueTableName('orders');
    await createIdempotencyTable(client, tableName);
    await createTableWithKey(client, ordersTable);
    test = await startApp('express', shopModule(localClient(proxy.endpoint), tableName, ordersTable));
  });
  afterEach(() => {
    proxy.failNext = undefined;
    proxy.dropAnswers = 0;
  });
  afterAll(async () => {
    await test.close();
    await proxy.stop();
  });

  it('sends a first request as exactly one UpdateItem (the claim) and one TransactWriteItems (order + completion)', async () => {
    const id = newId();
    proxy.operations.length = 0;
    const first = await post(`${test.url}/shop/orders/${id}`, {}, { 'Idempotency-Key': `k-${id}` });
    expect(first.status).toBe(201);
    expect(proxy.operations).toEqual(['UpdateItem', 'TransactWriteItems']);
    expect(await order(id)).toMatchObject({ id: { S: id }, run: { N: String(shop().runs) } });
    expect(await keyItem(`k-${id}`)).toMatchObject({ status: 'COMPLETED' });
  });

  it('answers an uncached duplicate with one call: the item comes back with the failed claim', async () => {
    const id = newId();
    const first = await post(`${test.url}/shop/orders/${id}`, {}, { 'Idempotency-Key': `k-${id}` });
    const runs = shop().runs;
    proxy.operations.length = 0;
    const replay = await post(`${test.url}/shop/orders/${id}`, {}, { 'Idempotency-Key': `k-${id}` });
    expect(replay.status).toBe(201);
    expect(replay.text).toBe(first.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(proxy.operations).toEqual(['UpdateItem']);
    expect(shop().runs).toBe(runs);
  });

  it('rejects the request with 409 commit-rejected when a write fails its own condition, and writes nothing', async () => {
    const id = newId();
    // The order already exists (written by someone else): the handler's attribute_not_exists(id) fails.
    await post(`${test.url}/shop/orders/${id}`, {}, { 'Idempotency-Key': `other-${id}` });
    const existing = await order(id);
    const rejected = await post(`${test.url}/shop/orders/${id}`, { extraWrites: 1 }, { 'Idempotency-Key': `k-${id}` });
    expect(rejected.status).toBe(409);
    expect(rejected.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(rejected.text)).toMatchObject({
      type: ProblemType.commitRejected,
      status: 409,
      writeIndex: 0,
    });
    expect(rejected.text).not.toContain(ordersTable); // the application's table is for the log, not the client
    expect(await order(id)).toEqual(existing);
    expect(await order(`${id}-extra-0`)).toBeUndefined(); // the other write of the transaction did not happen
    expect(await keyItem(`k-${id}`)).toMatchObject({ status: 'FAILED' });

    // The key is claimable: once the conflicting order is gone, the same request goes through.
    await client.send(new DeleteItemCommand({ TableName: ordersTable, Key: { id: { S: id } } }));
    const retried = await post(`${test.url}/shop/orders/${id}`, { extraWrites: 1 }, { 'Idempotency-Key': `k-${id}` });
    expect(retried.status).toBe(201);
    expect(await order(`${id}-extra-0`)).toBeDefined();
  });

  it('cancels the transaction of an owner whose lease was taken over: exactly one order, the successor’s', async () => {
    const id = newId();
    const key = `k-${id}`;
    const firstRun = shop().runs + 1;
    const orphan = post(`${test.url}/shop/orders/${id}`, { park: true }, { 'Idempotency-Key': key });
    await until(() => shop().gates.get(firstRun));

    test.clock.advanceSeconds(7); // the route's 5 s lease and its 1.25 s clock-skew margin are over
    const successor = post(`${test.url}/shop/orders/${id}`, { park: true }, { 'Idempotency-Key': key });
    await until(() => shop().gates.get(firstRun + 1));
    shop().gates.get(firstRun + 1)!();
    expect((await successor).status).toBe(201);

    shop().gates.get(firstRun)!();
    const orphanResponse = await orphan;
    expect(orphanResponse.status).toBe(409);
    expect(JSON.parse(orphanResponse.text)).toMatchObject({ type: ProblemType.inFlight });
    expect(await order(id)).toMatchObject({ run: { N: String(firstRun + 1) } });

    const replay = await post(`${test.url}/shop/orders/${id}`, { park: true }, { 'Idempotency-Key': key });
    expect(JSON.parse(replay.text)).toEqual({ id, run: firstRun + 1 });
    // Both runs derived the same key for the provider, though their claim tokens differ.
    const [orphanKey, successorKey] = shop().derivedKeys.slice(-2);
    expect(successorKey).toBe(orphanKey);
    expect(shop().claimTokens.at(-1)).not.toBe(shop().claimTokens.at(-2));
  });

  it('lets DynamoDB answer a re-sent transaction that had committed unseen (ClientRequestToken from the claim)', async () => {
    const repository = new DynamoDbIdempotencyRepository({
      client: localClient(proxy.endpoint),
      tableName,
      clock: testClock(),
    });
    const id = newId();
    const key = `commit-retry-${id}`;
    const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
    if (!claim.claimed) throw new Error('claim lost');
    const input = {
      key,
      claimToken: claim.claimToken,
      response: { statusCode: 201, headers: {}, body: { id } },
      ttlSeconds: 60,
      writes: [{ Put: { TableName: ordersTable, Item: { id }, ConditionExpression: 'attribute_not_exists(id)' } }],
    };
    // Every attempt of the SDK (3 in these tests) lands, and every answer is lost: the service sees a store fault.
    proxy.operations.length = 0;
    proxy.dropAnswers = 3;
    proxy.dropAnswersOf = 'TransactWriteItems';
    await expect(repository.complete(input)).rejects.toThrow(/unavailable/);
    expect(proxy.operations).toEqual(Array(3).fill('TransactWriteItems'));
    // The service's own retry sends it again. The SDK's token is per call; this one is the claim's, so DynamoDB
    // recognises the request and answers it as committed (with a fresh token, it would be cancelled on the condition).
    expect(await repository.complete(input)).toEqual({ ok: true, expiresAt: expect.any(Number) });
    expect(await order(id)).toBeDefined();
  });

  it('retries a transaction conflict and commits', async () => {
    const id = newId();
    proxy.failNext = {
      operation: 'TransactWriteItems',
      count: 1,
      type: 'TransactionCanceledException',
      fields: { CancellationReasons: [{ Code: 'None' }, { Code: 'TransactionConflict', Message: 'conflict' }] },
    };
    const response = await post(`${test.url}/shop/orders/${id}`, {}, { 'Idempotency-Key': `k-${id}` });
    expect(response.status).toBe(201);
    expect(await order(id)).toBeDefined();
    expect(await keyItem(`k-${id}`)).toMatchObject({ status: 'COMPLETED' });
  });

  it('answers 503 with nothing written and the key released when conflicts outlast the retries', async () => {
    const id = newId();
    const runs = shop().runs;
    proxy.operations.length = 0;
    proxy.failNext = {
      operation: 'TransactWriteItems',
      count: 10_000,
      type: 'TransactionCanceledException',
      fields: { CancellationReasons: [{ Code: 'None' }, { Code: 'TransactionConflict', Message: 'conflict' }] },
    };
    const response = await post(`${test.url}/shop/orders/${id}`, {}, { 'Idempotency-Key': `k-${id}` });
    expect(response.status).toBe(503);
    expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.storeUnavailable });
    expect(await order(id)).toBeUndefined();
    expect(await keyItem(`k-${id}`)).toMatchObject({ status: 'FAILED' });
    proxy.failNext = undefined;
    const retried = await post(`${test.url}/shop/orders/${id}`, {}, { 'Idempotency-Key': `k-${id}` });
    expect(retried.status).toBe(201);
    expect(shop().runs).toBe(runs + 2);
    expect(await order(id)).toBeDefined();
  }, 40_000);

  it('refuses more than 99 writes and a transaction over 4 MB before sending anything, and releases the key', async () => {
    for (const body of [{ extraWrites: 99 }, { extraWrites: 10, padding: 390 * 1024 }]) {
      const id = newId();
      proxy.operations.length = 0;
      const response = await post(`${test.url}/shop/orders/${id}`, body, { 'Idempotency-Key': `k-${id}` });
      expect(response.status).toBe(500);
      expect(proxy.operations).not.toContain('TransactWriteItems');
      expect(await order(id)).toBeUndefined();
      expect(await keyItem(`k-${id}`)).toMatchObject({ status: 'FAILED' });
    }
  });

  it('has the TTL API: ensureIdempotencyTable enables TTL and table:check passes', async () => {
    const lines: string[] = [];
    const out = { log: (line: string) => lines.push(line), error: (line: string) => lines.push(line) };
    const code = await runTableCli(
      ['table:check', '--table', tableName, '--endpoint', (await startStore('dynamodb-local')).endpoint],
      out,
    );
    expect(lines).toContain(`ok: TTL is ENABLED on expires_at`);
    expect(code).toBe(0);
  });
});

describe('commitWith without transactions', () => {
  it('is refused with a clear error on dynalite (never a silent non-atomic write)', async () => {
    const dynamo = await startDynalite();
    const client = localClient(dynamo.endpoint);
    const tableName = uniqueTableName();
    const ordersTable = uniqueTableName('orders');
    await createIdempotencyTable(client, tableName);
    await createTableWithKey(client, ordersTable);
    const test = await startApp('express', shopModule(client, tableName, ordersTable));
    try {
      const service = test.get(IdempotencyService);
      await expect(
        service.execute({ operation: 'probe', key: 'k' }, (context) => {
          expect(context.active).toBe(true);
          expect(context.canCommitWith).toBe(false);
          context.commitWith({ Put: { TableName: ordersTable, Item: { id: 'x' } } });
        }),
      ).rejects.toThrow(/no transactions/);
      const response = await post(`${test.url}/shop/orders/o1`, {}, { 'Idempotency-Key': 'k-o1' });
      expect(response.status).toBe(500);
      expect((await scanTable(client, ordersTable)).length).toBe(0);
      expect((await scanTable(client, tableName)).map(({ item }) => item.status)).toEqual(['FAILED', 'FAILED']);
    } finally {
      await test.close();
      await dynamo.stop();
    }
  });
});

describe('IdempotencyContext', () => {
  // Each test gets its own app on the in-memory repository, which shares the app's clock.
  let repository: InMemoryIdempotencyRepository;
  let test: TestApp;
  beforeEach(async () => {
    const clock = testClock();
    repository = new InMemoryIdempotencyRepository(clock);
    test = await startApp('express', shopModule({} as DynamoDBClient, 'unused', 'orders', { repository }), { clock });
  });
  afterEach(() => test.close());

  it('records commitWith writes in the in-memory repository, without applying them, for unit tests', async () => {
    const response = await post(`${test.url}/shop/orders/o1`, {}, { 'Idempotency-Key': 'k1' });
    expect(response.status).toBe(201);
    expect(repository.commits).toEqual([
      {
        key: recordKey('POST /shop/orders/:id', undefined, 'k1'),
        writes: [
          {
            Put: {
              TableName: 'orders',
              Item: { id: 'o1', run: 1, padding: '' },
              ConditionExpression: 'attribute_not_exists(id)',
            },
          },
        ],
      },
    ]);
  });

  it('derives keys stable per record and name, distinct across names and records, never the raw key', async () => {
    const service = test.get(IdempotencyService);
    const derive = (key: string, operation = 'charge') =>
      service.execute({ operation, key }, (context) => [
        context.deriveKey('provider'),
        context.deriveKey('mailer'),
        context.recordKey,
      ]);
    const [provider, mailer, record] = await derive('raw-client-key-1');
    expect(provider).toMatch(/^[0-9a-f]{64}$/);
    expect(mailer).not.toBe(provider);
    expect(provider).not.toContain('raw-client-key-1');
    expect(record).toBe(recordKey('fn charge', undefined, 'raw-client-key-1'));
    expect((await derive('raw-client-key-2'))[0]).not.toBe(provider);
    expect((await derive('raw-client-key-1', 'refund'))[0]).not.toBe(provider);
    // A second run of the same record (the first released by an error) derives the same key, under a new claim.
    const runs: { derived: string; claimToken: string }[] = [];
    const run = (fail: boolean) =>
      service.execute({ operation: 'retry', key: 'k' }, (context) => {
        runs.push({ derived: context.deriveKey('provider'), claimToken: context.claimToken });
        if (fail) throw new Error('first run fails');
      });
    await run(true).catch(() => undefined);
    await run(false);
    expect(runs).toHaveLength(2);
    expect(runs[1].derived).toBe(runs[0].derived);
    expect(runs[1].claimToken).not.toBe(runs[0].claimToken);
    expect(runs[0].derived).not.toBe(runs[0].claimToken);
  });

  it('refuses writes given after the call returned (work it left running), instead of dropping them silently', async () => {
    let late!: Promise<unknown>;
    await test.get(IdempotencyService).execute({ operation: 'late', key: 'k' }, (context) => {
      late = new Promise((resolve) =>
        setTimeout(() => {
          try {
            context.commitWith({ Put: { TableName: 'orders', Item: { id: 'late' } } });
            resolve('accepted');
          } catch (error) {
            resolve(error);
          }
        }, 20),
      );
      return 'done';
    });
    expect(await late).toEqual(expect.objectContaining({ message: expect.stringMatching(/already returned/) }));
    expect(repository.commits).toEqual([]);
  });

  it('is inactive outside a protected call and says so when used there', async () => {
    const context = test.get(IdempotencyContext);
    expect(context.active).toBe(false);
    expect(context.canCommitWith).toBe(false);
    expect(() => context.recordKey).toThrow(/only available inside a protected call/);
    expect(() => context.commitWith()).toThrow(/only available inside a protected call/);
  });
});
