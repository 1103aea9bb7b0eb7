import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { configFromEnv } from '../../apps/orders-api/src/config';
import { lambdaHandler, LambdaHttpHandler } from '../../apps/orders-api/src/lambda';
import { Dynalite, localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { createIdempotencyTable, createTableWithKey } from '../support/table';
import { EVENT_SOURCES, pathEvent, header, lambdaContext, LambdaHttpResponse, orderEvent } from './invocations';

const order = { item: 'book', quantity: 1 };

/**
 * The demo's Lambda handler in-process, on recorded API Gateway (HTTP API 2.0, REST 1.0) and ALB events with a fake
 * context: each "container" is one handler (one Nest app), as Lambda creates one per concurrent execution.
 */
describe.each(ENGINES)('the Lambda handler on %s', (engine) => {
  let store: Dynalite;
  let client: DynamoDBClient;
  let env: Record<string, string>;
  const containers: ReturnType<typeof lambdaHandler>[] = [];
  const container = (overrides: Record<string, string> = {}) => {
    const handler = lambdaHandler(configFromEnv({ ...env, ...overrides }));
    containers.push(handler);
    return handler;
  };
  const invoke = async (handler: LambdaHttpHandler, event: unknown) =>
    (await handler(event, lambdaContext())) as LambdaHttpResponse;

  beforeAll(async () => {
    store = await startStore(engine);
    const { endpoint } = store;
    client = localClient(endpoint);
    env = {
      DYNAMODB_ENDPOINT: endpoint,
      IDEMPOTENCY_TABLE: uniqueTableName('lambda'),
      ORDERS_TABLE: uniqueTableName('lambda_orders'),
      AWS_LAMBDA_FUNCTION_NAME: 'orders-api',
      // Every duplicate reaches DynamoDB, not the container's replay cache.
      IDEMPOTENCY_REPLAY_CACHE: '0',
      ORDER_PROCESSING_DELAY_MS: '300',
    };
    // The function creates no table: the deployment does.
    await createIdempotencyTable(client, env.IDEMPOTENCY_TABLE);
    await createTableWithKey(client, env.ORDERS_TABLE);
  }, 60_000);
  afterAll(async () => {
    for (const handler of containers) await handler.close();
    await store.stop();
  });

  describe.each(EVENT_SOURCES)('%s events', (source) => {
    it('201, then a replay, a 422 for another body and a 400 without a key, in the source’s response shape', async () => {
      const handler = container();
      const key = `lambda-${engine}-${source}`;
      const first = await invoke(handler, orderEvent(source, key, order));
      expect(first).toMatchObject({ statusCode: 201, isBase64Encoded: false });
      const created = JSON.parse(first.body);
      expect(header(first, 'location')).toBe(`/orders/${created.id}`);
      expect(header(first, 'content-type')).toMatch(/^application\/json/);

      const again = await invoke(handler, orderEvent(source, key, order));
      expect(again).toMatchObject({ statusCode: 201, isBase64Encoded: false, body: first.body });
      expect(header(again, 'idempotent-replayed')).toBe('true');

      const other = await invoke(handler, orderEvent(source, key, { item: 'pen', quantity: 1 }));
      expect(other.statusCode).toBe(422);
      expect(header(other, 'content-type')).toMatch(/^application\/problem\+json/);

      const keyless = await invoke(handler, orderEvent(source, undefined, order));
      expect(keyless.statusCode).toBe(400);
      expect(JSON.parse(keyless.body)).toMatchObject({ type: 'urn:nestjs-dynamodb-idempotency:key-missing' });
    });
  });

  it.each(EVENT_SOURCES)('a binary answer (%s) leaves base64-encoded and replays byte for byte', async (source) => {
    const handler = container();
    const created = await invoke(handler, orderEvent(source, `lambda-${engine}-${source}-order`, order));
    const receipt = pathEvent(
      source,
      `lambda-${engine}-${source}-receipt`,
      `/orders/${JSON.parse(created.body).id}/receipts`,
    );
    const first = await invoke(handler, receipt);
    expect(first).toMatchObject({ statusCode: 201, isBase64Encoded: true });
    expect(header(first, 'content-type')).toBe('application/pdf');
    const bytes = Buffer.from(first.body, 'base64');
    expect(bytes.subarray(0, 8).toString('latin1')).toBe('%PDF-1.4');
    expect(bytes.toString('latin1')).toMatch(/%\xe2\xe3\xcf\xd3/); // bytes that are not UTF-8 survived

    const again = await invoke(handler, receipt);
    expect(again).toMatchObject({ statusCode: 201, isBase64Encoded: true, body: first.body });
    expect(header(again, 'idempotent-replayed')).toBe('true');
    expect(header(again, 'content-type')).toBe('application/pdf');
  });

  it('two containers: the second gets 409 while the first runs, then the replay; one order', async () => {
    // The overlap made certain: the first runs 3 s, the second is warm (its cold start done by a request without a
    // key), and it is sent once the first's claim is in the table.
    const slow = { ORDER_PROCESSING_DELAY_MS: '3000' };
    const [one, two] = [container(slow), container(slow)];
    expect((await invoke(two, orderEvent('api-gateway-v2', undefined, order))).statusCode).toBe(400);
    const key = `lambda-${engine}-scale-out`;
    const running = invoke(one, orderEvent('api-gateway-v2', key, order));
    for (let claimed = false; !claimed; await new Promise((resolve) => setTimeout(resolve, 20))) {
      const { Items = [] } = await client.send(
        new ScanCommand({ TableName: env.IDEMPOTENCY_TABLE, ConsistentRead: true }),
      );
      claimed = Items.some((item) => item.status?.S === 'PENDING'); // this table's other tests leave none
    }
    const conflict = await invoke(two, orderEvent('api-gateway-v2', key, order));
    expect(conflict.statusCode).toBe(409);
    expect(header(conflict, 'retry-after')).toBe('1');
    const first = await running;
    expect(first.statusCode).toBe(201);
    const replay = await invoke(two, orderEvent('api-gateway-v2', key, order));
    expect(replay.body).toBe(first.body);
    expect(header(replay, 'idempotent-replayed')).toBe('true');
    const { Items = [] } = await client.send(new ScanCommand({ TableName: env.ORDERS_TABLE, ConsistentRead: true }));
    expect(Items.filter((item) => item.id.S === JSON.parse(first.body).id)).toHaveLength(1);
  });

  it('a bootstrap that failed (the table not created yet) is tried again by the next invocation, not kept', async () => {
    const late = { ...env, IDEMPOTENCY_TABLE: uniqueTableName('lambda_late') };
    const handler = lambdaHandler(configFromEnv(late));
    containers.push(handler);
    const key = `lambda-${engine}-late-table`;
    // The startup check fails: the missing table is named, with the command that creates it.
    await expect(invoke(handler, orderEvent('api-gateway-v2', key, order))).rejects.toThrow(/table:create/);
    await createIdempotencyTable(client, late.IDEMPOTENCY_TABLE);
    expect((await invoke(handler, orderEvent('api-gateway-v2', key, order))).statusCode).toBe(201);
  });
});
