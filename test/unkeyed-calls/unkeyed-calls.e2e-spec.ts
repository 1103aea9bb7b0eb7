import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { IdempotencyModule, UnkeyedCalls, watchUnkeyedWrites } from 'nestjs-dynamodb-idempotency';
// Node's channels are shared by every module registry of a Jest worker: whether this file's copy observes is asked.
import { observingOutgoingRequests } from '../../libs/idempotency/src/unkeyed-calls/outgoing-requests';
import { post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable, createTableWithKey } from '../support/table';
import { metricValue, registerTestTelemetry } from '../support/telemetry';
import {
  CallOut,
  CallsController,
  CLIENTS,
  Clients,
  Downstream,
  DOWNSTREAM,
  DynamoDbWrite,
} from './unkeyed-calls.fixture';

const telemetry = registerTestTelemetry();
const UNKEYED = 'idempotency_unkeyed_calls_total';
const unkeyed = async (labels: Record<string, string> = {}) => metricValue(await telemetry.scrape(), UNKEYED, labels);

let store: Dynalite;
const downstream = new Downstream();
beforeAll(async () => {
  store = await startDynalite();
  await downstream.start();
});
afterAll(async () => {
  await downstream.stop();
  await store.stop();
});

let keys = 0;
const newKey = () => `unkeyed-${++keys}-${Date.now()}`;

/** An app whose module watches side effects as `mode` says, its own table and orders table, on dynalite (or `endpoint`). */
async function appWatching(mode: UnkeyedCalls | undefined, logs?: CapturedLogs, endpoint = store.endpoint) {
  const tableName = uniqueTableName();
  const table = uniqueTableName('orders');
  const clients: Clients = { module: localClient(endpoint), other: localClient(endpoint), table };
  await createIdempotencyTable(clients.module, tableName);
  await createTableWithKey(clients.module, table);
  logs?.start();
  const app = await startApp(
    'express',
    {
      imports: [
        IdempotencyModule.forRoot({
          client: clients.module,
          tableName,
          unkeyedCalls: mode,
          replayCache: { enabled: false },
        }),
      ],
      controllers: [CallsController],
      providers: [
        { provide: DOWNSTREAM, useValue: downstream },
        { provide: CLIENTS, useValue: clients },
      ],
    },
    { realTime: true },
  );
  return { app, clients, tableName };
}

const callOut = (app: TestApp, route: 'http' | 'outside', body: CallOut) =>
  post(`${app.url}/calls/${route}`, body, route === 'http' ? { 'Idempotency-Key': newKey() } : {});
const received = (since: number) => downstream.received.slice(since);

describe("unkeyedCalls: 'warn' (the default)", () => {
  const logs = new CapturedLogs();
  let app: TestApp;
  let clients: Clients;
  beforeAll(async () => ({ app, clients } = await appWatching(undefined, logs)));
  afterAll(async () => {
    await app.close();
    logs.stop();
  });
  beforeEach(() => logs.clear());

  it.each(['fetch', 'http', 'axios'] as const)(
    'reports a POST sent through %s without a key, counts it, and lets it go',
    async (via) => {
      const before = await unkeyed({ kind: 'http', operation: 'POST' });
      const since = downstream.received.length;
      const answer = await callOut(app, 'http', { via });
      expect(answer.status).toBe(201);
      expect(JSON.parse(answer.text)).toEqual({ status: 201 });
      expect(received(since)).toEqual([{ method: 'POST', path: '/charges', key: undefined }]);
      expect(await unkeyed({ kind: 'http', operation: 'POST' })).toBe(before + 1);
    },
  );

  it('warns once per route and target, naming the route, the method and the host', async () => {
    const other = new Downstream();
    await other.start();
    try {
      const host = new URL(other.url).host;
      for (const via of ['fetch', 'http', 'axios'] as const) await callOut(app, 'http', { via, url: other.url });
      await callOut(app, 'http', { via: 'fetch', url: other.url, method: 'DELETE' });
      const warnings = logs.at('warn').filter((entry) => (entry as { host?: string }).host === host);
      expect(warnings).toEqual([
        expect.objectContaining({ route: 'POST /calls/http', kind: 'http', method: 'POST', host }),
        expect.objectContaining({ route: 'POST /calls/http', kind: 'http', method: 'DELETE', host }),
      ]);
      expect((warnings[0] as { msg: string }).msg).toMatch(/without an idempotency key.*docs\/clients\.md/);
    } finally {
      await other.stop();
    }
  });

  it.each([
    ['fetch with a key', { via: 'fetch', keyed: true }],
    ['node:http with a key', { via: 'http', keyed: true }],
    ['axios with a key', { via: 'axios', keyed: true }],
    ['the retrying client by name', { via: 'client' }],
    ['a GET without a key', { via: 'fetch', method: 'GET' }],
    ['a HEAD without a key', { via: 'http', method: 'HEAD' }],
    ['an OPTIONS without a key', { via: 'axios', method: 'OPTIONS' }],
  ] as [string, CallOut][])('reports nothing for %s (nor the module’s own DynamoDB calls)', async (_, body) => {
    const before = await unkeyed();
    const since = downstream.received.length;
    const answer = await callOut(app, 'http', body);
    expect(JSON.parse(answer.text)).toEqual({ status: 201 });
    expect(received(since)).toHaveLength(1);
    if (body.method === undefined) expect(received(since)[0].key).toMatch(/^[0-9a-f]{64}$/);
    expect(await unkeyed()).toBe(before);
    expect(logs.at('warn')).toEqual([]);
  });

  it('reports nothing outside a protected call', async () => {
    const before = await unkeyed();
    for (const via of ['fetch', 'http', 'axios'] as const) {
      const answer = await callOut(app, 'outside', { via });
      expect(JSON.parse(answer.text)).toEqual({ status: 201 });
    }
    expect(await unkeyed()).toBe(before);
    expect(logs.at('warn')).toEqual([]);
  });

  it('reports a POST without a key inside IdempotencyService.execute(), under its operation', async () => {
    const other = new Downstream();
    await other.start();
    try {
      const answer = await post(`${app.url}/calls/execute`, { via: 'fetch', url: other.url, key: newKey() });
      expect(JSON.parse(answer.text)).toEqual({ status: 201 });
      expect(logs.at('warn')).toEqual([
        expect.objectContaining({ route: 'fn call-out', method: 'POST', host: new URL(other.url).host }),
      ]);
    } finally {
      await other.stop();
    }
  });

  it.each(['PutItem', 'UpdateItem', 'DeleteItem'])(
    'reports a %s without a condition sent through the module’s client, and writes it',
    async (op) => {
      const before = await unkeyed({ kind: 'dynamodb', operation: op });
      const answer = await post(
        `${app.url}/calls/dynamodb`,
        { client: 'module', op, id: `${op}-${newKey()}` },
        { 'Idempotency-Key': newKey() },
      );
      expect(JSON.parse(answer.text)).toEqual({ status: 200 });
      expect(await unkeyed({ kind: 'dynamodb', operation: op })).toBe(before + 1);
    },
  );

  it('warns once per route and table, naming the route, the operation and the table', async () => {
    const table = uniqueTableName('warned');
    await createTableWithKey(clients.module, table);
    const write = (op: DynamoDbWrite['op']) =>
      post(`${app.url}/calls/dynamodb`, { client: 'module', op, id: newKey(), table }, { 'Idempotency-Key': newKey() });
    for (const op of ['PutItem', 'PutItem', 'UpdateItem'] as const) await write(op);
    expect(logs.at('warn').filter((entry) => (entry as { table?: string }).table === table)).toEqual([
      expect.objectContaining({ route: 'POST /calls/dynamodb', kind: 'dynamodb', operation: 'PutItem', table }),
      expect.objectContaining({ route: 'POST /calls/dynamodb', kind: 'dynamodb', operation: 'UpdateItem', table }),
    ]);
  });

  it('judges a document client made from the module’s client (they share its middleware), and writes its put', async () => {
    const id = newKey();
    const before = await unkeyed({ kind: 'dynamodb', operation: 'PutItem' });
    await post(`${app.url}/calls/dynamodb`, { client: 'document', op: 'PutItem', id }, { 'Idempotency-Key': newKey() });
    expect(await unkeyed({ kind: 'dynamodb', operation: 'PutItem' })).toBe(before + 1);
    const { Item } = await clients.module.send(
      new GetItemCommand({ TableName: clients.table, Key: { id: { S: id } }, ConsistentRead: true }),
    );
    expect(Item).toBeDefined();
  });

  it('reports nothing for a conditional write', async () => {
    const before = await unkeyed();
    for (const op of ['PutItem', 'UpdateItem', 'DeleteItem']) {
      const answer = await post(
        `${app.url}/calls/dynamodb`,
        { client: 'module', op, id: `${op}-${newKey()}`, conditional: true },
        { 'Idempotency-Key': newKey() },
      );
      expect(answer.status).toBe(201);
    }
    expect(await unkeyed()).toBe(before);
  });

  it('judges another client of the application once it is given to watchUnkeyedWrites (twice changes nothing)', async () => {
    const write = () =>
      post(
        `${app.url}/calls/dynamodb`,
        { client: 'other', op: 'PutItem', id: newKey() },
        { 'Idempotency-Key': newKey() },
      );
    const before = await unkeyed({ kind: 'dynamodb' });
    await write();
    expect(await unkeyed({ kind: 'dynamodb' })).toBe(before);
    watchUnkeyedWrites(clients.other);
    watchUnkeyedWrites(clients.other);
    await write();
    expect(await unkeyed({ kind: 'dynamodb' })).toBe(before + 1);
  });
});

describe("unkeyedCalls: 'error'", () => {
  let app: TestApp;
  let clients: Clients;
  beforeAll(async () => ({ app, clients } = await appWatching('error')));
  afterAll(() => app.close());

  const refusal =
    /^POST \/calls\/http sent POST 127\.0\.0\.1:\d+ without an Idempotency-Key header: a re-run of this call would send it again\. Pass a key \(IdempotencyContext\.deriveKey\(name\), or the client's \{ name \}\)\.$/;

  it.each(['http', 'axios'] as const)(
    'fails a POST sent through %s without a key with UnkeyedCallError',
    async (via) => {
      const answer = await callOut(app, 'http', { via });
      expect(JSON.parse(answer.text)).toEqual({ error: 'UnkeyedCallError', message: expect.stringMatching(refusal) });
    },
  );

  it('fails a fetch POST without a key before a byte reaches the server (the error is fetch’s cause)', async () => {
    const since = downstream.received.length;
    const answer = JSON.parse((await callOut(app, 'http', { via: 'fetch' })).text);
    // Node's undici keeps an error of its own realm as it is; Jest's module realm makes it wrap it by its text.
    const message =
      answer.name === 'UnkeyedCallError' ? answer.message : answer.message.replace(/^UnkeyedCallError: /, '');
    expect(message).toMatch(refusal);
    expect(received(since)).toEqual([]);
  });

  it('lets keyed and safe requests go, and requests outside protected calls', async () => {
    const since = downstream.received.length;
    for (const body of [{ via: 'fetch', keyed: true }, { via: 'client' }, { via: 'http', method: 'GET' }] as CallOut[])
      expect(JSON.parse((await callOut(app, 'http', body)).text)).toEqual({ status: 201 });
    expect(JSON.parse((await callOut(app, 'outside', { via: 'axios' })).text)).toEqual({ status: 201 });
    expect(received(since)).toHaveLength(4);
  });

  it('fails a DynamoDB put without a condition before it is sent; a conditional one is written', async () => {
    const id = newKey();
    const refused = await post(
      `${app.url}/calls/dynamodb`,
      { client: 'module', op: 'PutItem', id },
      { 'Idempotency-Key': newKey() },
    );
    expect(JSON.parse(refused.text)).toEqual({
      error: 'UnkeyedCallError',
      message: `POST /calls/dynamodb sent PutItem to table ${clients.table} without a ConditionExpression: a re-run of this call would write again. Add a condition, or write it with IdempotencyContext.commitWith().`,
    });
    const get = () =>
      clients.module.send(
        new GetItemCommand({ TableName: clients.table, Key: { id: { S: id } }, ConsistentRead: true }),
      );
    expect((await get()).Item).toBeUndefined();
    const conditional = { client: 'module', op: 'PutItem', id, conditional: true };
    expect(
      JSON.parse((await post(`${app.url}/calls/dynamodb`, conditional, { 'Idempotency-Key': newKey() })).text),
    ).toEqual({ status: 200 });
    expect((await get()).Item).toBeDefined();
  });
});

describeOnDynamoDbLocal("unkeyedCalls: 'error', on a store with transactions (DynamoDB Local)", () => {
  let app: TestApp;
  let clients: Clients;
  beforeAll(async () => {
    const { endpoint } = await startStore('dynamodb-local');
    ({ app, clients } = await appWatching('error', undefined, endpoint));
  });
  afterAll(() => app.close());
  const stored = async (id: string) =>
    (
      await clients.module.send(
        new GetItemCommand({ TableName: clients.table, Key: { id: { S: id } }, ConsistentRead: true }),
      )
    ).Item;

  it('never judges a write given to commitWith: the module sends it with the completion', async () => {
    const id = newKey();
    const answer = await post(`${app.url}/calls/commit`, { id }, { 'Idempotency-Key': newKey() });
    expect(answer.status).toBe(201);
    expect(await stored(id)).toBeDefined();
  });

  it('refuses the same put sent by the handler itself', async () => {
    const id = newKey();
    const answer = await post(`${app.url}/calls/commit`, { id, direct: true }, { 'Idempotency-Key': newKey() });
    expect(JSON.parse(answer.text)).toMatchObject({ error: 'UnkeyedCallError' });
    expect(await stored(id)).toBeUndefined();
  });
});

describe("unkeyedCalls: 'off'", () => {
  let app: TestApp;
  let clients: Clients;
  beforeAll(async () => ({ app, clients } = await appWatching('off')));
  afterAll(() => app.close());

  it('subscribes to nothing, reports nothing and adds no middleware', async () => {
    expect(clients.module.middlewareStack.identify().join()).not.toMatch(/Unkeyed/i);
    expect(observingOutgoingRequests()).toBe(false);
    const before = await unkeyed();
    const answer = await post(
      `${app.url}/calls/dynamodb`,
      { client: 'module', op: 'PutItem', id: newKey() },
      { 'Idempotency-Key': newKey() },
    );
    expect(JSON.parse(answer.text)).toEqual({ status: 200 });
    expect(await unkeyed()).toBe(before);
  });
});

it('stops observing requests when the last watching application closes', async () => {
  const first = await appWatching('warn');
  const second = await appWatching('warn');
  expect(observingOutgoingRequests()).toBe(true);
  await first.app.close();
  expect(observingOutgoingRequests()).toBe(true);
  await second.app.close();
  expect(observingOutgoingRequests()).toBe(false);
});
