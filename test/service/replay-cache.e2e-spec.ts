import { IdempotencyAdmin, ProblemType } from 'nestjs-dynamodb-idempotency';
import { post, startApp, TestApp } from '../support/app';
import { countCalls } from '../support/call-counter';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';
import { paymentsModule, Runs } from '../http/payments.fixture';

/** DynamoDB calls per request, counted by an SDK middleware: the cost the performance issue promises. */
describe('DynamoDB calls per request, the replay cache and single-flight', () => {
  let dynamo: Dynalite;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(() => dynamo.stop());

  async function app(replayCache?: { enabled?: boolean; maxEntries?: number }, table?: string) {
    const client = localClient(dynamo.endpoint);
    const tableName = table ?? uniqueTableName();
    if (!table) await createIdempotencyTable(client, tableName);
    const calls = countCalls(client);
    const test = await startApp('express', paymentsModule(client, tableName, { replayCache }));
    return { test, calls };
  }
  let keys = 0;
  const send = (test: TestApp, key: string, amount = 1) =>
    post(`${test.url}/payments`, { amount }, { 'Idempotency-Key': key });

  it('first request: 2 calls (claim, complete); cached replay: 0; uncached duplicate on dynalite: 2 (claim, read)', async () => {
    const cached = await app();
    const uncached = await app({ enabled: false });
    try {
      for (const { test, calls } of [cached, uncached]) {
        const key = `calls-${++keys}`;
        calls.reset();
        await send(test, key);
        expect(calls.counts).toEqual({ UpdateItem: 2 });
        calls.reset();
        const replay = await send(test, key);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        // dynalite ignores ReturnValuesOnConditionCheckFailure, hence the read; DynamoDB returns the item instead
        // (see the mocked-client spec): 1 call there.
        expect(calls.counts).toEqual(test === cached.test ? {} : { UpdateItem: 1, GetItem: 1 });
      }
    } finally {
      await cached.test.close();
      await uncached.test.close();
    }
  });

  it('checks the fingerprint and the expiry of cached records', async () => {
    const { test, calls } = await app();
    try {
      const key = `cached-${++keys}`;
      await send(test, key, 10);
      calls.reset();
      expect((await send(test, key, 11)).status).toBe(422);
      expect(calls.total()).toBe(0);

      test.clock.advanceSeconds(86_401); // past the retention: the cached record no longer counts
      const rerun = await send(test, key, 10);
      expect(rerun.headers.get('idempotent-replayed')).toBeNull();
      // The resume form is refused (a finished record), read (dynalite returns no item), restarted, then completed.
      expect(calls.counts).toEqual({ UpdateItem: 3, GetItem: 1 });
    } finally {
      await test.close();
    }
  });

  it('evicts the least recently used record beyond maxEntries', async () => {
    const { test, calls } = await app({ maxEntries: 2 });
    try {
      const [a, b, c] = [`lru-a-${++keys}`, `lru-b-${keys}`, `lru-c-${keys}`];
      for (const key of [a, b]) await send(test, key);
      await send(test, a); // a is now the most recently used
      await send(test, c); // evicts b
      calls.reset();
      await send(test, a);
      await send(test, c);
      expect(calls.total()).toBe(0);
      await send(test, b);
      expect(calls.counts).toEqual({ UpdateItem: 1, GetItem: 1 }); // a refused claim, the record read
    } finally {
      await test.close();
    }
  });

  it('keeps no response over 64 KB (as JSON): its duplicates are answered from DynamoDB', async () => {
    const { test, calls } = await app();
    try {
      const key = `large-${++keys}`;
      const first = await post(`${test.url}/payments/large`, {}, { 'Idempotency-Key': key });
      calls.reset();
      const replay = await post(`${test.url}/payments/large`, {}, { 'Idempotency-Key': key });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(calls.counts).toEqual({ UpdateItem: 1, GetItem: 1 });
      expect(test.get(Runs).of('large')).toBe(1);
    } finally {
      await test.close();
    }
  });

  it('keeps no result that could not be stored: its duplicates get 409 response-not-stored, from DynamoDB', async () => {
    const { test, calls } = await app();
    try {
      const key = `unstorable-${++keys}`;
      await post(`${test.url}/payments/body/unstorable`, {}, { 'Idempotency-Key': key }); // the platform's own error
      calls.reset();
      const duplicate = await post(`${test.url}/payments/body/unstorable`, {}, { 'Idempotency-Key': key });
      expect(duplicate.status).toBe(409);
      expect(JSON.parse(duplicate.text)).toMatchObject({ type: ProblemType.responseNotStored });
      expect(calls.counts).toEqual({ UpdateItem: 1, GetItem: 1 });
      expect(test.get(Runs).of('body:unstorable')).toBe(1);
    } finally {
      await test.close();
    }
  });

  it('sends one claim for 20 concurrent requests with one key in one process', async () => {
    const { test, calls } = await app();
    try {
      const key = `flight-${++keys}`;
      calls.reset();
      const slow = () => post(`${test.url}/payments`, { amount: 1, delayMs: 300 }, { 'Idempotency-Key': key });
      const responses = await Promise.all(Array.from({ length: 20 }, slow));
      expect(calls.counts.UpdateItem).toBe(2); // one claim, one completion
      expect(test.get(Runs).of('create')).toBe(1);
      expect(responses.filter((r) => r.status === 201)).toHaveLength(1);
      expect(responses.filter((r) => r.status === 409)).toHaveLength(19);
    } finally {
      await test.close();
    }
  });

  it("lets waiting duplicates take the local owner's result without polling DynamoDB", async () => {
    const { test, calls } = await app();
    try {
      const key = `flight-wait-${++keys}`;
      calls.reset();
      const responses = await Promise.all(
        Array.from({ length: 10 }, () =>
          post(`${test.url}/payments/wait`, { delayMs: 200 }, { 'Idempotency-Key': key }),
        ),
      );
      expect(new Set(responses.map((r) => `${r.status} ${r.text}`)).size).toBe(1);
      expect(calls.counts).toEqual({ UpdateItem: 2 });
    } finally {
      await test.close();
    }
  });

  it('a purge takes effect at once in the process whose admin made it, and in every other once replayCache.maxAgeSeconds has passed', async () => {
    const tableName = uniqueTableName();
    await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
    // Two processes of one fleet, each with the default replay cache (10 s), and a third one's admin (an ops endpoint).
    const [a, b, ops] = await Promise.all([
      app(undefined, tableName),
      app(undefined, tableName),
      app(undefined, tableName),
    ]);
    try {
      const key = `purge-${++keys}`;
      const x = await send(a.test, key);
      expect((await send(b.test, key)).text).toBe(x.text); // b has it cached now
      expect((await send(a.test, key)).text).toBe(x.text); // and a too
      b.calls.reset();
      expect((await send(b.test, key)).text).toBe(x.text);
      expect(b.calls.total()).toBe(0); // from b's cache

      // a's own admin purges the key: a forgets it at once, so its next request runs the handler and stores y.
      const admin = a.test.get(IdempotencyAdmin);
      const purged = await admin.purge({ route: 'POST /payments', key });
      expect(purged).toMatchObject({ done: true });
      expect(purged.note).toMatch(/replayCache\.maxAgeSeconds/);
      const y = await send(a.test, key);
      expect(y.headers.get('idempotent-replayed')).toBeNull();
      expect(y.text).not.toBe(x.text);

      // b trusts its cached x for at most 10 s after it read it; then it reads the store and answers y, as all do.
      b.test.clock.advanceSeconds(9);
      expect((await send(b.test, key)).text).toBe(x.text); // within the documented bound
      b.test.clock.advanceSeconds(1);
      b.calls.reset();
      expect((await send(b.test, key)).text).toBe(y.text);
      expect(b.calls.total()).toBeGreaterThan(0);
      for (const test of [a.test, b.test, ops.test]) expect((await send(test, key)).text).toBe(y.text);
      expect([a, b, ops].map(({ test }) => test.get(Runs).of('create'))).toEqual([2, 0, 0]);

      // A purge from a third process (the CLI, another pod's ops endpoint): a and b answer y until their entries' age
      // passes, then run the handler once (a) and replay its answer (b).
      expect(await ops.test.get(IdempotencyAdmin).purge({ route: 'POST /payments', key })).toMatchObject({
        done: true,
      });
      a.test.clock.advanceSeconds(10);
      b.test.clock.advanceSeconds(10);
      const z = await send(a.test, key);
      expect(z.headers.get('idempotent-replayed')).toBeNull();
      expect((await send(b.test, key)).text).toBe(z.text);
      expect(a.test.get(Runs).of('create')).toBe(3);
    } finally {
      await Promise.all([a, b, ops].map(({ test }) => test.close()));
    }
  });
});
