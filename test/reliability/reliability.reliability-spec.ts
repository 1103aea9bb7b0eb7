import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { decodeStoredResponse } from '../../libs/idempotency/src/response/stored-response.codec';
import { describeOnDynamoDbLocal } from '../support/engines';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { scanTable } from '../support/table';
import { localClient } from '../support/dynalite';
import { metricValue } from '../support/telemetry';
import {
  AppProc,
  findings,
  ordersIn,
  placeOrder,
  Proc,
  record,
  Resolution,
  startDemo,
  startDynaliteProcess,
  tally,
} from './cluster';

/**
 * `npm run test:reliability`: the demo as separate processes on one dynalite process, with crashes, faults and a
 * store restart. Every scenario asserts on what clients saw and on what the tables hold.
 */
jest.setTimeout(120_000);

const running: Proc[] = [];
async function track<T extends Proc>(proc: Promise<T>): Promise<T> {
  const started = await proc;
  running.push(started);
  return started;
}
afterEach(async () => {
  await Promise.all(running.splice(0).map((proc) => proc.kill('SIGKILL')));
});
afterAll(() => {
  console.log(`\nReliability findings:\n${findings.map((line) => `- ${line}`).join('\n')}`);
});

const orderFor = (key: string) => ({ item: key, quantity: 1 });
const allStatuses = (resolutions: Resolution[]) => tally(resolutions.flatMap((r) => r.statuses));

it('many instances: one order per key, identical answers per key, no 5xx', async () => {
  const { endpoint } = await track(startDynaliteProcess());
  const apps = await Promise.all([1, 2, 3].map(() => track(startDemo(endpoint, { ORDER_PROCESSING_DELAY_MS: '50' }))));

  const keys = Array.from({ length: 40 }, (_, i) => `many-${i}`);
  const sendsPerKey = 8;
  const resolutions = await Promise.all(
    keys.flatMap((key) =>
      Array.from({ length: sendsPerKey }, (_, send) =>
        placeOrder(apps[send % apps.length].url, key, orderFor(key)).then((r) => ({ key, ...r })),
      ),
    ),
  );

  const orders = await ordersIn(endpoint);
  for (const key of keys) {
    const answers = resolutions.filter((r) => r.key === key).map((r) => r.final);
    expect(new Set(answers.map((a) => `${a.status} ${a.text}`)).size).toBe(1);
    expect(answers[0].status).toBe(201);
    const mine = orders.filter((order) => order.item === key);
    expect(mine).toHaveLength(1);
    expect(JSON.parse(answers[0].text).id).toBe(mine[0].id);
  }
  const statuses = allStatuses(resolutions);
  expect(Object.keys(statuses).filter((status) => Number(status) >= 500)).toEqual([]);
  const executed = resolutions.filter((r) => !r.final.replayed).length;
  expect(executed).toBe(keys.length);
  record(
    `many instances: 3 app processes, ${keys.length} keys × ${sendsPerKey} concurrent sends = ${resolutions.length} clients, ` +
      `${resolutions.reduce((n, r) => n + r.statuses.length, 0)} HTTP requests (statuses ${JSON.stringify(statuses)}); ` +
      `${orders.length} orders, 1 per key; every key's ${sendsPerKey} final answers identical; handler ran ${executed} times`,
  );
});

it('crash mid-handler: 409 until the lease passes, then exactly one retry runs', async () => {
  const { endpoint } = await track(startDynaliteProcess());
  const env = { ORDER_PROCESSING_DELAY_MS: '1500', IDEMPOTENCY_PENDING_TTL_SECONDS: '3' };
  const [victim, survivor, other] = await Promise.all([1, 2, 3].map(() => track(startDemo(endpoint, env))));

  const key = 'crash-1';
  const doomed = placeOrder(victim.url, key, orderFor(key), 1000);
  await sleep(500); // the victim has claimed the key and is inside the slow payment step
  await victim.kill('SIGKILL');
  const crashedAt = Date.now();
  await doomed;

  const retries = await Promise.all(
    [survivor, other, survivor, other].map((app, i) =>
      sleep(i * 300).then(() => placeOrder(app.url, key, orderFor(key))),
    ),
  );
  const firstRun = Math.min(...retries.map((r) => r.statuses.indexOf(201)).filter((i) => i >= 0));
  const orders = (await ordersIn(endpoint)).filter((order) => order.item === key);
  expect(orders).toHaveLength(1);
  expect(new Set(retries.map((r) => r.final.text)).size).toBe(1);
  expect(retries.map((r) => r.final.status)).toEqual([201, 201, 201, 201]);
  expect(retries.filter((r) => !r.final.replayed)).toHaveLength(1);
  expect(retries.every((r) => r.statuses.every((status) => status === 409 || status === 201))).toBe(true);
  expect(retries[0].statuses[0]).toBe(409); // the dead worker's lease still held
  record(
    `crash: SIGKILL of the instance holding the claim (3 s lease, 1.5 s handler); retries saw ` +
      `${JSON.stringify(allStatuses(retries))} over ${((Date.now() - crashedAt) / 1000).toFixed(1)} s, the first 201 after ` +
      `${firstRun} refusals; 1 order in the table; 1 execution after the crash, 3 replays`,
  );
});

it("paused past its lease: a retry elsewhere takes over; the resumed owner's late completion is refused and counted", async () => {
  const { endpoint } = await track(startDynaliteProcess());
  const env = { ORDER_PROCESSING_DELAY_MS: '3000', IDEMPOTENCY_PENDING_TTL_SECONDS: '1' };
  const [paused, successor] = await Promise.all([1, 2].map(() => track(startDemo(endpoint, env))));

  const key = 'paused-1';
  const first = placeOrder(paused.url, key, orderFor(key));
  await sleep(1500); // the owner has renewed its 1 s lease a few times: a live owner is never taken over
  const whileAlive = await fetch(`${successor.url}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(orderFor(key)),
  });
  paused.signal('SIGSTOP'); // a GC pause, a frozen VM: no renewals
  const pausedAt = Date.now();
  const takeover = await placeOrder(successor.url, key, orderFor(key));
  const takenOverAfterMs = Date.now() - pausedAt;
  paused.signal('SIGCONT');
  const late = await first;
  const replay = await placeOrder(paused.url, key, orderFor(key));

  const orders = (await ordersIn(endpoint)).filter((order) => order.item === key);
  const pausedMetrics = await (await fetch(`${paused.url}/metrics`)).text();
  expect(whileAlive.status).toBe(409);
  expect(whileAlive.headers.get('retry-after')).toBe('1');
  expect(takeover.final).toMatchObject({ status: 201, replayed: false });
  expect(late.final.status).toBe(201); // its caller still gets its own result
  expect(JSON.parse(late.final.text).id).not.toBe(JSON.parse(takeover.final.text).id);
  expect(replay.final).toMatchObject({ status: 201, replayed: true, text: takeover.final.text });
  // The one double execution a lease cannot prevent: made visible, never silent.
  expect(orders).toHaveLength(2);
  expect(metricValue(pausedMetrics, 'dedup_lease_renewal_refused_total')).toBe(1);
  expect(metricValue(pausedMetrics, 'idempotency_requests_total', { outcome: 'lease_lost' })).toBe(1);
  expect(metricValue(pausedMetrics, 'dedup_duplicate_reexecution_total')).toBe(1);
  record(
    `paused owner: 1 s lease renewed while a 3 s handler ran (a duplicate 1.5 s in got 409, Retry-After 1); the owner ` +
      `was SIGSTOPped; a retry on another instance got 409 ${takeover.statuses.length - 1} times, then claimed the key and ` +
      `answered 201 ${(takenOverAfterMs / 1000).toFixed(1)} s after the pause (its own handler included); on SIGCONT the owner's renewal was refused ` +
      `(dedup_lease_renewal_refused_total 1) and its completion too (lease_lost 1, dedup_duplicate_reexecution_total 1); ` +
      `its caller got its own order, replays return the successor's; ${orders.length} orders: the double execution a ` +
      'paused process causes, detected and counted',
  );
});

it('a live owner slower than its lease is never taken over', async () => {
  const { endpoint } = await track(startDynaliteProcess());
  const env = { ORDER_PROCESSING_DELAY_MS: '4000', IDEMPOTENCY_PENDING_TTL_SECONDS: '1' };
  const apps = await Promise.all([1, 2, 3].map(() => track(startDemo(endpoint, env))));

  const key = 'slow-1';
  const first = placeOrder(apps[0].url, key, orderFor(key));
  await sleep(300);
  const duplicates = await Promise.all(
    [1, 2, 1, 2].map((i, n) => sleep(n * 500).then(() => placeOrder(apps[i].url, key, orderFor(key)))),
  );
  const owner = await first;

  const orders = (await ordersIn(endpoint)).filter((order) => order.item === key);
  expect(orders).toHaveLength(1);
  expect(owner.final).toMatchObject({ status: 201, replayed: false });
  for (const duplicate of duplicates)
    expect(duplicate.final).toMatchObject({ status: 201, replayed: true, text: owner.final.text });
  const refusals = duplicates.reduce((n, d) => n + d.statuses.filter((status) => status === 409).length, 0);
  record(
    `slow owner: 4 s handler, 1 s lease, renewed every ~0.33 s; 4 duplicates on 2 other instances saw ${refusals} × 409 ` +
      `then the replay; 1 order`,
  );
});

describe('throttling storm and outage', () => {
  let proxy: FaultProxy;
  afterEach(() => proxy?.stop());

  it('answers only 503s for faults, never runs twice, and resolves every key after recovery', async () => {
    const store = await track(startDynaliteProcess());
    proxy = await startFaultProxy(store.endpoint);
    const env = { ORDER_PROCESSING_DELAY_MS: '20', IDEMPOTENCY_PENDING_TTL_SECONDS: '5' };
    const apps: AppProc[] = await Promise.all([1, 2, 3].map(() => track(startDemo(proxy.endpoint, env))));

    const keys = Array.from({ length: 30 }, (_, i) => `storm-${i}`);
    let next = 0;
    const roundRobin = () => apps[next++ % apps.length].url;
    const clients: Array<Promise<Resolution & { key: string }>> = [];
    const send = (key: string) =>
      clients.push(placeOrder(roundRobin, key, orderFor(key), 60_000).then((r) => ({ key, ...r })));

    keys.slice(0, 10).forEach(send);
    await sleep(300);
    proxy.mode = 'throttle';
    proxy.throttleFraction = 0.3;
    keys.forEach(send);
    await sleep(2000);
    proxy.mode = 'drop';
    const duringOutage = await Promise.all(
      keys.slice(0, 5).map((key) =>
        fetch(`${roundRobin()}/orders`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': `outage-${key}` },
          body: JSON.stringify(orderFor(`outage-${key}`)),
        }).then((r) => r.status),
      ),
    );
    keys.forEach(send);
    await sleep(2000);
    proxy.mode = 'pass';
    keys.forEach(send);
    const resolutions = await Promise.all(clients);

    expect(duringOutage).toEqual([503, 503, 503, 503, 503]);
    const orders = await ordersIn(store.endpoint);
    for (const key of keys) {
      const answers = resolutions.filter((r) => r.key === key);
      const finals = new Set(answers.map((r) => `${r.final.status} ${r.final.text}`));
      expect(finals.size).toBe(1);
      expect(answers[0].final.status).toBe(201);
      const mine = orders.filter((order) => order.item === key);
      expect(mine).toHaveLength(1);
      expect(JSON.parse(answers[0].final.text).id).toBe(mine[0].id);
    }
    expect(orders.filter((order) => order.item.startsWith('outage-'))).toEqual([]);
    const statuses = allStatuses(resolutions);
    expect(Object.keys(statuses).filter((s) => !['0', '201', '409', '503'].includes(s))).toEqual([]);
    const calls = proxy.operations.length;
    record(
      `storm: 3 app processes behind a fault proxy: 30 % of DynamoDB calls throttled for 2 s, then every connection ` +
        `dropped for 2 s, then recovery. ${resolutions.length} clients over ${keys.length} keys made ` +
        `${resolutions.reduce((n, r) => n + r.statuses.length, 0)} requests (statuses ${JSON.stringify(statuses)}); ` +
        `5 requests during the outage all got 503 and created nothing; after recovery every key resolved to one ` +
        `answer and exactly one order (${orders.length} orders); the proxy saw ${calls} DynamoDB calls`,
    );
  });
});

it('store restart: no completed result is lost', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'dynalite-'));
  try {
    let store = await track(startDynaliteProcess({ path: dir }));
    const { endpoint } = store;
    const app = await track(startDemo(endpoint));
    const keys = Array.from({ length: 10 }, (_, i) => `restart-${i}`);
    const before = await Promise.all(keys.map((key) => placeOrder(app.url, key, orderFor(key))));

    await store.kill('SIGKILL');
    const newKeyDuringRestart = await placeOrder(app.url, 'restart-new', orderFor('restart-new'), 0);
    const cachedDuringRestart = await placeOrder(app.url, 'restart-0', orderFor('restart-0'), 0);
    store = await track(startDynaliteProcess({ port: Number(new URL(endpoint).port), path: dir }));
    // A process started after the restart has nothing cached: its replays come from the files dynalite reopened.
    const fresh = await track(startDemo(endpoint));
    const after = await Promise.all(keys.map((key) => placeOrder(fresh.url, key, orderFor(key))));

    expect(newKeyDuringRestart.final.status).toBe(503);
    expect(cachedDuringRestart.final).toMatchObject({ status: 201, replayed: true, text: before[0].final.text });
    for (const [i, answer] of after.entries()) {
      expect(answer.final.replayed).toBe(true);
      expect(answer.final.text).toBe(before[i].final.text);
    }
    expect((await ordersIn(endpoint)).filter((order) => order.item.startsWith('restart-')).length).toBe(keys.length);
    record(
      'store restart: 10 orders completed on dynalite on disk, dynalite SIGKILLed; meanwhile a new key got 503 and a ' +
        "completed one was replayed from the instance's cache; dynalite restarted on the same files; a new instance " +
        '(empty cache) replayed all 10 keys byte-identical; still 10 orders',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * On AWS's DynamoDB Local, where the demo commits each order with its key's completion (`commitWith`): the order
 * exists if and only if its key is COMPLETED, whenever the process dies.
 */
describeOnDynamoDbLocal('exactly-once orders on DynamoDB Local', () => {
  const endpoint = process.env.DYNAMODB_LOCAL_ENDPOINT!;
  const freshTables = () => {
    const suffix = randomBytes(4).toString('hex');
    return { IDEMPOTENCY_TABLE: `idempotency_${suffix}`, ORDERS_TABLE: `orders_${suffix}` };
  };

  it('sends a first POST /orders as one PutItem (the claim) and one TransactWriteItems (order + completion)', async () => {
    const proxy = await startFaultProxy(endpoint);
    try {
      // Without the reconciler: its sweep (a Query of the index of keys in flight) is no call of the request's.
      const demo = await track(startDemo(proxy.endpoint, { ...freshTables(), RECONCILE_INTERVAL_SECONDS: '0' }));
      expect(demo.output).toContain('POST /orders commits each order with its idempotency key in one transaction');
      proxy.operations.length = 0;
      const { final } = await placeOrder(demo.url, 'calls-1', orderFor('calls-1'), 0);
      expect(final.status).toBe(201);
      expect(proxy.operations).toEqual(['UpdateItem', 'TransactWriteItems']);
      record('DynamoDB Local: a first POST /orders sent PutItem + TransactWriteItems and nothing else');
    } finally {
      await proxy.stop();
    }
  });

  it('SIGKILL at 30 random moments of first requests: never an order without its completed key, one order per key after retries', async () => {
    const tables = freshTables();
    const env = {
      ...tables,
      IDEMPOTENCY_PENDING_TTL_SECONDS: '1',
      ORDER_PROCESSING_DELAY_MS: '150',
      IDEMPOTENCY_REPLAY_CACHE: '0',
    };
    const client = localClient(endpoint);
    const state = async () => {
      const records = (await scanTable(client, tables.IDEMPOTENCY_TABLE)).map(({ item }) => item);
      const completedOrderIds = new Set(
        records
          .filter((r) => r.status === 'COMPLETED')
          .map((r) => (decodeStoredResponse(r.response).body as { id: string }).id),
      );
      return { records, completedOrderIds, orders: await ordersIn(endpoint, tables.ORDERS_TABLE) };
    };
    const retrier = await track(startDemo(endpoint, env));
    const keys: string[] = [];
    const beforeKill: number[] = [];
    for (let round = 0; round < 10; round++) {
      const victim = await track(startDemo(endpoint, env));
      const roundKeys = [0, 1, 2].map((i) => `kill-${round}-${i}`);
      keys.push(...roundKeys);
      // Three first requests 70 ms apart and one kill at a random moment: each is caught in its own phase (before
      // the claim, in the 150 ms handler, in the transaction, or already answered).
      const attempts = roundKeys.map((key, i) =>
        sleep(i * 70).then(() => placeOrder(victim.url, key, orderFor(key), 0)),
      );
      await sleep(Math.random() * 450);
      await victim.kill('SIGKILL');
      beforeKill.push(...(await Promise.all(attempts)).map(({ final }) => final.status));

      const { orders, completedOrderIds } = await state();
      for (const order of orders) expect(completedOrderIds.has(order.id)).toBe(true);
    }

    const resolutions = await Promise.all(keys.map((key) => placeOrder(retrier.url, key, orderFor(key))));
    expect(resolutions.map((r) => r.final.status)).toEqual(keys.map(() => 201));
    const { records, orders, completedOrderIds } = await state();
    for (const key of keys) expect(orders.filter((order) => order.item === key)).toHaveLength(1);
    expect(orders).toHaveLength(keys.length);
    expect(records.map((r) => r.status)).toEqual(keys.map(() => 'COMPLETED'));
    expect(new Set(orders.map((order) => order.id))).toEqual(completedOrderIds);
    client.destroy();
    record(
      `DynamoDB Local: SIGKILL of the demo at 30 random moments (answers before the kill: ${JSON.stringify(tally(beforeKill))}); ` +
        `after retries ${keys.length} keys COMPLETED, ${orders.length} orders, none ever without its completed key`,
    );
  });
});
