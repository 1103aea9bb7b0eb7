import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { configFromEnv } from '../../apps/orders-api/src/config';
import { RunningOrdersApi, startOrdersApi } from '../../apps/orders-api/src/orders-api';
import { post } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';

const order = { item: 'book', quantity: 2 };

describe('orders-api demo', () => {
  describe.each(['express', 'fastify'])('on %s (PLATFORM) with the embedded dynalite', (platform) => {
    let api: RunningOrdersApi;
    beforeAll(async () => {
      const env = { PLATFORM: platform, PORT: '0', ORDER_PROCESSING_DELAY_MS: '150' };
      api = await startOrdersApi(configFromEnv(env), { logger: false });
    });

    it('runs on the platform it was given', async () => {
      const health = await fetch(`${api.url}/health`);
      expect(health.headers.get('x-powered-by')).toBe(platform === 'express' ? 'Express' : null);
      expect(api.app.getHttpAdapter().getType()).toBe(platform);
    });
    afterAll(() => api.close());

    it('reports healthy once its tables exist', async () => {
      const health = await fetch(`${api.url}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({
        status: 'ok',
        details: { idempotency_store: { status: 'up' }, orders_table: { status: 'up' } },
      });
    });

    it('creates one order per key, replays it with its Location, and lists it once', async () => {
      const first = await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'order-a' });
      const again = await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'order-a' });
      expect(first.status).toBe(201);
      const created = JSON.parse(first.text);
      expect(created).toEqual({ id: expect.any(String), item: 'book', quantity: 2, createdAt: expect.any(String) });
      expect(first.headers.get('location')).toBe(`/orders/${created.id}`);
      expect(again.status).toBe(201);
      expect(again.text).toBe(first.text);
      expect(again.headers.get('location')).toBe(first.headers.get('location'));
      expect(again.headers.get('idempotent-replayed')).toBe('true');

      const fetched = await fetch(`${api.url}/orders/${created.id}`);
      expect(await fetched.json()).toEqual(created);
      const all = (await (await fetch(`${api.url}/orders`)).json()) as Array<{ id: string }>;
      expect(all.filter((o) => o.id === created.id)).toHaveLength(1);
    });

    it('checks out through its own payment provider by default: one charge per checkout key, the same answer', async () => {
      const charges = async () => (await (await fetch(`${api.url}/payments/charges`)).json()) as { key: string }[];
      const before = (await charges()).length;
      const first = await post(`${api.url}/checkouts`, { item: 'lamp', amount: 900 }, { 'Idempotency-Key': 'co-1' });
      const again = await post(`${api.url}/checkouts`, { item: 'lamp', amount: 900 }, { 'Idempotency-Key': 'co-1' });
      expect(first.status).toBe(201);
      expect(JSON.parse(first.text)).toEqual({
        checkoutId: expect.any(String),
        item: 'lamp',
        amount: 900,
        chargeId: expect.any(String),
        charge: { replayed: false, attempts: 1 },
      });
      expect(again.text).toBe(first.text);
      expect((await charges()).slice(before)).toEqual([
        expect.objectContaining({ chargeId: JSON.parse(first.text).chargeId, amount: 900, key: expect.any(String) }),
      ]);
      const bad = await post(`${api.url}/checkouts`, { item: 'lamp' }, { 'Idempotency-Key': 'co-2' });
      expect(bad.status).toBe(400);
    });

    it('lets a browser client send Idempotency-Key and read Idempotent-Replayed and Retry-After (CORS)', async () => {
      const origin = 'http://shop.example';
      const preflight = await fetch(`${api.url}/orders`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type,idempotency-key',
        },
      });
      expect(preflight.status).toBeLessThan(300);
      expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('idempotency-key');
      const created = await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'order-cors', origin });
      const exposed = created.headers
        .get('access-control-expose-headers')
        ?.toLowerCase()
        .split(/\s*,\s*/);
      expect(exposed).toEqual(expect.arrayContaining(['idempotent-replayed', 'retry-after', 'location']));
    });

    it('serves its OpenAPI document, which describes POST /orders as idempotent, and Swagger UI at /docs', async () => {
      const document = (await (await fetch(`${api.url}/docs-json`)).json()) as {
        paths: Record<string, Record<string, { parameters?: { name: string }[]; 'x-idempotency'?: unknown }>>;
      };
      const create = document.paths['/orders'].post;
      expect(create.parameters?.map((parameter) => parameter.name)).toContain('Idempotency-Key');
      expect(create['x-idempotency']).toMatchObject({ mode: expect.any(String), ttlSeconds: expect.any(Number) });
      const ui = await fetch(`${api.url}/docs`);
      expect(ui.status).toBe(200);
      expect(await ui.text()).toContain('swagger-ui');
    });

    it('answers a concurrent duplicate with 409 while the first is still processing', async () => {
      const responses = await Promise.all([
        post(`${api.url}/orders`, order, { 'Idempotency-Key': 'order-b' }),
        post(`${api.url}/orders`, order, { 'Idempotency-Key': 'order-b' }),
      ]);
      expect(responses.map((r) => r.status).sort()).toEqual([201, 409]);
      const conflict = responses.find((r) => r.status === 409)!;
      // The owner renews its lease while it works: look again in a second, not when the 60 s lease would end.
      expect(conflict.headers.get('retry-after')).toBe('1');
    });

    it('rejects an invalid order with a 400 problem and leaves the key usable', async () => {
      const invalid = await post(`${api.url}/orders`, { item: '', quantity: 1.5 }, { 'Idempotency-Key': 'order-c' });
      expect(invalid.status).toBe(400);
      expect(invalid.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(invalid.text).detail).toMatch(/quantity must be a positive integer/);
      const valid = await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'order-c' });
      expect(valid.status).toBe(201);
    });

    it('answers a malformed JSON body with a 400 problem, and the key is still usable', async () => {
      const malformed = await fetch(`${api.url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'order-malformed' },
        body: '{"item": "book", "quantity": ',
      });
      expect(malformed.status).toBe(400);
      expect(malformed.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await malformed.json()).toMatchObject({
        type: 'about:blank',
        title: 'Bad Request',
        status: 400,
        detail: expect.any(String),
      });
      const valid = await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'order-malformed' });
      expect(valid.status).toBe(201);
      expect(valid.headers.get('idempotent-replayed')).toBeNull();
    });

    it('answers 404 as a problem for an unknown order', async () => {
      const missing = await fetch(`${api.url}/orders/does-not-exist`);
      expect(missing.status).toBe(404);
      expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    });
  });

  describe('two instances on one DynamoDB endpoint', () => {
    let dynamo: Dynalite;
    let instances: RunningOrdersApi[];
    beforeAll(async () => {
      dynamo = await startDynalite();
      const env = {
        PORT: '0',
        DYNAMODB_ENDPOINT: dynamo.endpoint,
        ORDERS_TABLE: 'shared_orders',
        IDEMPOTENCY_TABLE: 'shared_keys',
      };
      instances = [
        await startOrdersApi(configFromEnv(env), { logger: false }),
        await startOrdersApi(configFromEnv(env), { logger: false }),
      ];
    });
    afterAll(async () => {
      for (const instance of instances) await instance.close();
      await dynamo.stop();
    });

    it('share every key: a retry on the other instance is a replay, and the table holds one order', async () => {
      const [one, two] = instances;
      const first = await post(`${one.url}/orders`, order, { 'Idempotency-Key': 'shared' });
      const retry = await post(`${two.url}/orders`, order, { 'Idempotency-Key': 'shared' });
      expect(retry.text).toBe(first.text);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');

      const client: DynamoDBClient = localClient(dynamo.endpoint);
      const { Items = [] } = await client.send(new ScanCommand({ TableName: 'shared_orders' }));
      expect(Items.map((item) => unmarshall(item).id)).toEqual([JSON.parse(first.text).id]);
      const keys = await client.send(new ScanCommand({ TableName: 'shared_keys' }));
      expect(keys.Items?.map((item) => item.status.S)).toEqual(['COMPLETED']);
    });
  });

  // DynamoDB Local: its transactions commit each order with its key (commitWith), both items in the one table.
  describeOnDynamoDbLocal('one table for orders and keys (IDEMPOTENCY_PARTITION_KEY, _SORT_KEY, _KEY_PREFIX)', () => {
    const table = uniqueTableName('single');
    let api: RunningOrdersApi;
    let client: DynamoDBClient;
    beforeAll(async () => {
      const { endpoint } = await startStore('dynamodb-local');
      client = localClient(endpoint);
      const env = {
        PORT: '0',
        DYNAMODB_ENDPOINT: endpoint,
        IDEMPOTENCY_TABLE: table,
        IDEMPOTENCY_PARTITION_KEY: 'PK',
        IDEMPOTENCY_SORT_KEY: 'SK',
        IDEMPOTENCY_KEY_PREFIX: 'IDEMPOTENCY#',
      };
      api = await startOrdersApi(configFromEnv(env), { logger: false });
    }, 60_000);
    afterAll(() => api.close());

    it('keeps each order beside its key, replays it, and lists orders only', async () => {
      const first = await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'single-a' });
      const again = await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'single-a' });
      expect(first.status).toBe(201);
      expect(again.text).toBe(first.text);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      const created = JSON.parse(first.text);

      const { Items = [] } = await client.send(new ScanCommand({ TableName: table, ConsistentRead: true }));
      const items = Items.map((item) => unmarshall(item));
      expect(items).toHaveLength(2);
      // The key the order was placed under is stored beside it (GET /orders?key=), never in the order's JSON.
      expect(items).toContainEqual({
        PK: `ORDER#${created.id}`,
        SK: `ORDER#${created.id}`,
        entity: 'order',
        idempotencyKey: 'single-a',
        ...created,
      });
      const record = items.find((item) => item.SK.startsWith('IDEMPOTENCY#'));
      expect(record).toMatchObject({ PK: expect.stringMatching(/^IDEMPOTENCY#/), status: 'COMPLETED' });
      expect(record!.expires_at).toEqual(expect.any(Number));

      expect(await (await fetch(`${api.url}/orders`)).json()).toEqual([created]);
      expect(await (await fetch(`${api.url}/orders?key=single-a`)).json()).toEqual([created]);
      expect(await (await fetch(`${api.url}/orders?key=single-b`)).json()).toEqual([]);
      expect(await (await fetch(`${api.url}/orders/${created.id}`)).json()).toEqual(created);
    });

    it('sets the table up with the configured keys and TTL on expires_at', async () => {
      const { DescribeTableCommand, DescribeTimeToLiveCommand } = await import('@aws-sdk/client-dynamodb');
      const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
      expect(Table?.KeySchema).toEqual([
        { AttributeName: 'PK', KeyType: 'HASH' },
        { AttributeName: 'SK', KeyType: 'RANGE' },
      ]);
      const ttl = await client.send(new DescribeTimeToLiveCommand({ TableName: table }));
      expect(ttl.TimeToLiveDescription).toMatchObject({ AttributeName: 'expires_at', TimeToLiveStatus: 'ENABLED' });
    });
  });
});
