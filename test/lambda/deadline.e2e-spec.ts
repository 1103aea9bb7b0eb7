import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { Dynalite, localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { createTableWithKey, scanTable } from '../support/table';
import { LambdaContainer } from './containers';
import { orderEvent, pathEvent } from './invocations';

const order = { item: 'book', quantity: 1 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Leases that end at the invocation's deadline, with containers as Lambda runs them: processes of their own, frozen
 * (SIGSTOP) when an invocation times out. The lease is 60 s (the default); the clock-skew margin 2 s.
 */
describe.each(ENGINES)('Lambda deadlines on %s', (engine) => {
  let store: Dynalite;
  let client: DynamoDBClient;
  let env: Record<string, string>;
  let first: LambdaContainer;
  let second: LambdaContainer;

  beforeAll(async () => {
    store = await startStore(engine);
    client = localClient(store.endpoint);
    env = {
      DYNAMODB_ENDPOINT: store.endpoint,
      IDEMPOTENCY_TABLE: uniqueTableName('deadline'),
      ORDERS_TABLE: uniqueTableName('deadline_orders'),
      AWS_LAMBDA_FUNCTION_NAME: 'orders-api',
      ORDER_PROCESSING_DELAY_MS: '3000',
    };
    // Without TTL: DynamoDB Local deletes expired items (as DynamoDB may, any time after they expire), which would free
    // a key whose lease ended at the deadline before the clock-skew margin this test measures (docs/lambda.md).
    await createTableWithKey(client, env.IDEMPOTENCY_TABLE, 'pk');
    await createTableWithKey(client, env.ORDERS_TABLE);
    [first, second] = await Promise.all([LambdaContainer.start(env), LambdaContainer.start(env)]);
    // Warm both (the app is created at a container's first invocation), so that a retry's claim is made when it is sent.
    await Promise.all(
      [first, second].map((container, i) =>
        container.invoke(pathEvent('api-gateway-v2', `warm-${engine}-${i}`, '/orders/none/receipts')),
      ),
    );
  }, 60_000);
  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()]);
    await store.stop();
  });

  it('a timed-out invocation frees its key right after its deadline; the retry runs once; the thawed one is refused', async () => {
    const key = `deadline-${engine}`;
    const timedOutOrder = { item: key, quantity: 1 }; // its orders are told apart from the other test's
    const started = Date.now();
    const deadline = started + 1000;
    // 1 s left, a 3 s handler: the invocation times out and its container is frozen mid-handler.
    expect(await first.invoke(orderEvent('api-gateway-v2', key, timedOutOrder), 1000)).toEqual({ timedOut: true });

    // The client retries 1.5 s after it started, in another container, every 250 ms while it gets 409.
    await sleep(started + 1500 - Date.now());
    const conflicts: number[] = [];
    let ran: { at: number; status: number; body: string } | undefined;
    while (!ran && Date.now() < deadline + 10_000) {
      const at = Date.now();
      const attempt = await second.invoke(orderEvent('api-gateway-v2', key, timedOutOrder));
      if (attempt.timedOut) throw new Error('the retry timed out');
      if (attempt.response.statusCode === 409) {
        conflicts.push(at);
        await sleep(250);
      } else {
        ran = { at, status: attempt.response.statusCode, body: attempt.response.body };
      }
    }
    expect(ran).toMatchObject({ status: 201 });
    expect(conflicts.length).toBeGreaterThan(0);
    // Claimable once the lease (cut at the deadline, whole seconds) is past by the 2 s margin: not before
    // deadline + 2 s, and by deadline + 3 s at the latest, not after the 60 s a lease would otherwise hold. A 409 means
    // the key was held when its claim was tried, after the attempt started: no attempt that started at deadline + 3 s or
    // later may have got one, however slowly a loaded machine answered it.
    expect(ran!.at).toBeGreaterThanOrEqual(deadline + 2000 - 50);
    expect(Math.max(...conflicts)).toBeLessThan(deadline + 3000);

    // The first container is thawed: its handler finishes late, and its completion is refused by the claim token.
    const late = first.lateReply();
    first.thaw();
    await late;
    expect(first.output).toMatch(/msg: 'completion refused',[^}]*reason: 'lease_lost'/);
    const records = (await scanTable(client, env.IDEMPOTENCY_TABLE)).filter(
      (record) => record.item.pk === recordKey('POST /orders', undefined, key),
    );
    expect(records).toHaveLength(1);
    expect(records[0].item).toMatchObject({ status: 'COMPLETED' });
    expect(JSON.parse(records[0].item.response).body).toEqual(JSON.parse(ran!.body));

    // With transactions (DynamoDB Local) the order is committed with the completion: only the retry's exists. On
    // dynalite the handler writes it itself, so the late first run wrote one too (docs/lambda.md says so).
    const { Items = [] } = await client.send(new ScanCommand({ TableName: env.ORDERS_TABLE, ConsistentRead: true }));
    const ordersOfKey = Items.filter((item) => item.item?.S === key);
    expect(ordersOfKey.length).toBe(engine === 'dynamodb-local' ? 1 : 2);
  }, 30_000);

  it('a frozen-then-thawed container serves the next invocation correctly', async () => {
    // Its own key: frozen mid-handler past the deadline, thawed before anyone retries, so its run completes the key.
    const key = `thaw-${engine}`;
    expect(await first.invoke(orderEvent('api-gateway-v2', key, order), 1000)).toEqual({ timedOut: true });
    const late = first.lateReply();
    first.thaw();
    expect((await late).result).toMatchObject({ statusCode: 201 });

    const replayed = await first.invoke(orderEvent('api-gateway-v2', key, order));
    expect(replayed).toMatchObject({ timedOut: false, response: { statusCode: 201 } });
    expect((replayed as { response: { headers: Record<string, string> } }).response.headers).toMatchObject({
      'idempotent-replayed': 'true',
    });
    const fresh = await first.invoke(orderEvent('api-gateway-v2', `after-thaw-${engine}`, order), 10_000);
    expect(fresh).toMatchObject({ timedOut: false, response: { statusCode: 201 } });
  }, 30_000);
});
