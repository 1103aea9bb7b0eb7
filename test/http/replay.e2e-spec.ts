import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { post, TestApp } from '../support/app';
import { PLATFORM_ENGINES } from '../support/engines';
import { scanTable } from '../support/table';
import { Runs } from './payments.fixture';
import { PaymentsScenario, startPaymentsScenario } from './payments.scenario';

describe.each(PLATFORM_ENGINES)('replay and request validation on %s, %s, %s layout', (platform, engine, layout) => {
  let scenario: PaymentsScenario;
  let client: DynamoDBClient;
  let tableName: string;
  let test: TestApp;
  let keys = 0;
  const newKey = () => `key-${platform}-${++keys}`;
  const runs = () => test.get(Runs);

  beforeAll(async () => {
    // No replay cache: every replay is decoded from the item dynalite returns.
    scenario = await startPaymentsScenario(platform, { engine, layout, module: { replayCache: { enabled: false } } });
    ({ client, tableName, test } = scenario);
  });
  afterAll(() => scenario.stop());

  it('runs the handler once and replays the first response byte for byte', async () => {
    const key = newKey();
    const before = runs().of('create');
    const first = await post(`${test.url}/payments`, { amount: 42 }, { 'Idempotency-Key': key });
    const second = await post(`${test.url}/payments`, { amount: 42 }, { 'Idempotency-Key': key });
    const third = await post(`${test.url}/payments`, { amount: 42 }, { 'Idempotency-Key': `"${key}"` });

    expect(first.status).toBe(201);
    expect(runs().of('create')).toBe(before + 1);
    for (const replay of [second, third]) {
      expect(replay.status).toBe(201);
      expect(replay.text).toBe(first.text);
      expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
      expect(replay.headers.get('location')).toBe(first.headers.get('location'));
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('set-cookie')).toBeNull();
    }
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.headers.get('set-cookie')).toBe('session=secret');
  });

  it('stores a COMPLETED item with Number timestamps and no raw key', async () => {
    const key = newKey();
    await post(`${test.url}/payments`, { amount: 7 }, { 'Idempotency-Key': key });
    const items = await scanTable(client, tableName, scenario.layout);
    const mine = items.filter(({ item }) => item.pk === recordKey('POST /payments', undefined, key));
    expect(mine).toHaveLength(1);
    const [{ raw, item }] = mine;
    expect(JSON.parse(item.response).body).toMatchObject({ amount: 7 });
    expect(item).toMatchObject({ status: 'COMPLETED', fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(item.pk).toMatch(/^POST \/payments#[0-9a-f]{64}$/);
    expect(raw.expires_at.N).toBeDefined();
    expect(Number(raw.expires_at.N) - Number(raw.completed_at.N)).toBe(86_400);
    expect(JSON.stringify(raw)).not.toContain(key);
  });

  // What Nest itself sends differs by platform for null (Express: nothing, Fastify: "null") and Buffers
  // (Express: the Buffer as JSON, Fastify: the bytes); a replay must match whatever the first response was.
  const bytes = Buffer.from([0, 1, 2, 250]).toString('latin1');
  it.each([
    ['empty', 204, ''],
    ['null', 200, platform === 'express' ? '' : 'null'],
    ['string', 200, 'plain text'],
    ['array', 200, '[1,{"two":2},"three"]'],
    ['accepted', 202, '{"queued":true}'],
    ['buffer', 200, platform === 'express' ? '{"type":"Buffer","data":[0,1,2,250]}' : bytes],
  ])('replays a %s body exactly as first sent', async (kind, status, text) => {
    const key = newKey();
    const exchange = async () => {
      const response = await fetch(`${test.url}/payments/body/${kind}`, {
        method: 'POST',
        headers: { 'Idempotency-Key': key },
      });
      return {
        status: response.status,
        type: response.headers.get('content-type'),
        bytes: Buffer.from(await response.arrayBuffer()),
      };
    };
    const first = await exchange();
    const replay = await exchange();
    expect(first.status).toBe(status);
    expect(first.bytes.toString('latin1')).toBe(text);
    expect(replay).toEqual(first);
    expect(runs().of(`body:${kind}`)).toBe(1);
  });

  it('answers 422 when the key is reused for a different request', async () => {
    const key = newKey();
    await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': key });
    const before = runs().of('create');
    const reused = await post(`${test.url}/payments`, { amount: 2 }, { 'Idempotency-Key': key });
    expect(reused.status).toBe(422);
    expect(reused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(reused.text)).toMatchObject({ type: ProblemType.fingerprintMismatch, status: 422 });
    expect(runs().of('create')).toBe(before);
  });

  it('treats JSON bodies with reordered keys as the same request', async () => {
    const key = newKey();
    const first = await post(
      `${test.url}/payments/body/object`,
      { a: 1, b: { c: 2, d: 3 } },
      { 'Idempotency-Key': key },
    );
    const second = await fetch(`${test.url}/payments/body/object`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'Idempotency-Key': key },
      body: '{"b":{"d":3,"c":2},"a":1}',
    });
    expect(second.status).toBe(first.status);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
  });

  it('scopes keys by caller: the same key from another tenant is a different record', async () => {
    const key = newKey();
    const alice = await post(`${test.url}/payments`, { amount: 5 }, { 'Idempotency-Key': key, 'x-tenant': 'alice' });
    const bob = await post(`${test.url}/payments`, { amount: 5 }, { 'Idempotency-Key': key, 'x-tenant': 'bob' });
    expect(bob.status).toBe(201);
    expect(bob.headers.get('idempotent-replayed')).toBeNull();
    expect(JSON.parse(bob.text).id).not.toBe(JSON.parse(alice.text).id);
  });

  it('answers 400 problem+json for a missing key, and the handler does not run', async () => {
    const before = runs().of('create');
    const response = await post(`${test.url}/payments`, { amount: 1 });
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(response.text)).toMatchObject({
      type: ProblemType.keyMissing,
      status: 400,
      title: expect.any(String),
    });
    expect(runs().of('create')).toBe(before);
  });

  it.each([
    ['empty', ''],
    ['empty quoted', '""'],
    ['over 255 characters', 'k'.repeat(256)],
    ['a control character', 'abc\tdef'],
    ['a list', 'one, two'],
  ])('answers 400 for a key that is %s', async (_, key) => {
    const before = runs().of('create');
    const response = await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': key });
    expect(response.status).toBe(400);
    expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.keyInvalid });
    expect(runs().of('create')).toBe(before);
  });

  it('answers 400 for a repeated Idempotency-Key header', async () => {
    const headers = new Headers({ 'content-type': 'application/json' });
    headers.append('Idempotency-Key', newKey());
    headers.append('Idempotency-Key', newKey());
    const response = await fetch(`${test.url}/payments`, { method: 'POST', headers, body: '{"amount":1}' });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { type: string }).type).toBe(ProblemType.keyInvalid);
  });

  it('accepts exactly 255 characters', async () => {
    const response = await post(
      `${test.url}/payments`,
      { amount: 255 },
      { 'Idempotency-Key': 'k'.repeat(254) + String(keys++ % 10) },
    );
    expect(response.status).toBe(201);
  });

  it('derives the key from the request when the route says so', async () => {
    const orderNumber = `order-${newKey()}`;
    const first = await post(`${test.url}/payments/by-order`, { orderNumber });
    const second = await post(`${test.url}/payments/by-order`, { orderNumber });
    expect(second.text).toBe(first.text);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(runs().of('by-order')).toBe(1);
    const invalid = await post(`${test.url}/payments/by-order`, { orderNumber: 'bad\u0001key' });
    expect(invalid.status).toBe(400);
    const missing = await post(`${test.url}/payments/by-order`, {});
    expect(missing.status).toBe(400);
    expect(JSON.parse(missing.text).type).toBe(ProblemType.keyMissing);
  });

  it('runs an optional route without a key every time, and idempotently with one', async () => {
    await post(`${test.url}/payments/optional`, {});
    await post(`${test.url}/payments/optional`, {});
    expect(runs().of('optional')).toBe(2);
    const key = newKey();
    await post(`${test.url}/payments/optional`, {}, { 'Idempotency-Key': key });
    await post(`${test.url}/payments/optional`, {}, { 'Idempotency-Key': key });
    expect(runs().of('optional')).toBe(3);
  });

  it('replays a response over 400 KB from its compressed copy', async () => {
    const key = newKey();
    const first = await post(`${test.url}/payments/large`, {}, { 'Idempotency-Key': key });
    const replay = await post(`${test.url}/payments/large`, {}, { 'Idempotency-Key': key });
    expect(first.text.length).toBeGreaterThan(400 * 1024);
    expect(replay.text).toBe(first.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(runs().of('large')).toBe(1);
  });

  it('never runs twice for a response too large to store: duplicates get 409 response-not-stored', async () => {
    const key = newKey();
    const first = await post(`${test.url}/payments/huge`, {}, { 'Idempotency-Key': key });
    expect(first.status).toBe(201);
    const duplicate = await post(`${test.url}/payments/huge`, {}, { 'Idempotency-Key': key });
    expect(duplicate.status).toBe(409);
    expect(JSON.parse(duplicate.text)).toMatchObject({ type: ProblemType.responseNotStored, originalStatus: 201 });
    expect(JSON.parse(duplicate.text).detail).toContain('it was too large to store, even compressed');
    expect(runs().of('huge')).toBe(1);
    const items = await scanTable(client, tableName, scenario.layout);
    expect(
      items.filter(({ item }) => item.pk.startsWith('POST /payments/huge#')).map(({ item }) => item.status),
    ).toEqual(['COMPLETED']);
  });
});
