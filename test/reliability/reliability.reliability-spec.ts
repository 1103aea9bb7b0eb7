import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../apps/orders-api/src/orders-api';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
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
  // eslint-disable-next-line no-console
  console.log(`\nReliability findings:\n${findings.map((line) => `- ${line}`).join('\n')}`);
});

const orderFor = (key: string) => ({ item: key, quantity: 1 });
const allStatuses = (resolutions: Resolution[]) => tally(resolutions.flatMap((r) => r.statuses));

it('many instances: one order per key, identical answers per key, no 5xx', async () => {
  const endpoint = `http://127.0.0.1:${await freePort()}`;
  await track(startDynaliteProcess(Number(new URL(endpoint).port)));
  const apps = await Promise.all([1, 2, 3].map(() => track(startDemo(endpoint, { ORDER_PROCESSING_DELAY_MS: '50' }))));

  const keys = Array.from({ length: 40 }, (_, i) => `many-${i}`);
  const sendsPerKey = 8;
  const resolutions = await Promise.all(
    keys.flatMap((key) =>
      Array.from({ length: sendsPerKey }, (_, send) => placeOrder(apps[send % apps.length].url, key, orderFor(key)).then((r) => ({ key, ...r }))),
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
  const endpoint = `http://127.0.0.1:${await freePort()}`;
  await track(startDynaliteProcess(Number(new URL(endpoint).port)));
  const env = { ORDER_PROCESSING_DELAY_MS: '1500', IDEMPOTENCY_PENDING_TTL_SECONDS: '3' };
  const [victim, survivor, other] = await Promise.all([1, 2, 3].map(() => track(startDemo(endpoint, env))));

  const key = 'crash-1';
  const doomed = placeOrder(victim.url, key, orderFor(key), 1000);
  await sleep(500); // the victim has claimed the key and is inside the slow payment step
  await victim.kill('SIGKILL');
  const crashedAt = Date.now();
  await doomed;

  const retries = await Promise.all(
    [survivor, other, survivor, other].map((app, i) => sleep(i * 300).then(() => placeOrder(app.url, key, orderFor(key)))),
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

it('orphaned worker: its late write is refused, the successor stands, its caller gets its own order', async () => {
  const endpoint = `http://127.0.0.1:${await freePort()}`;
  await track(startDynaliteProcess(Number(new URL(endpoint).port)));
  const env = { ORDER_PROCESSING_DELAY_MS: '3000', IDEMPOTENCY_PENDING_TTL_SECONDS: '1' };
  const [slow, successor] = await Promise.all([1, 2].map(() => track(startDemo(endpoint, env))));

  const key = 'orphan-1';
  const orphan = placeOrder(slow.url, key, orderFor(key));
  await sleep(2100); // the 1 s lease has passed while the orphan's handler still runs
  const next = placeOrder(successor.url, key, orderFor(key));
  const [orphanAnswer, successorAnswer] = await Promise.all([orphan, next]);
  const replay = await placeOrder(slow.url, key, orderFor(key));

  const orders = (await ordersIn(endpoint)).filter((order) => order.item === key);
  const orphanOrder = JSON.parse(orphanAnswer.final.text);
  const successorOrder = JSON.parse(successorAnswer.final.text);
  expect(orphanAnswer.final.status).toBe(201);
  expect(successorAnswer.final.status).toBe(201);
  expect(orders.map((order) => order.id).sort()).toEqual([orphanOrder.id, successorOrder.id].sort());
  expect(replay.final.replayed).toBe(true);
  expect(replay.final.text).toBe(successorAnswer.final.text);
  const slowMetrics = await (await fetch(`${slow.url}/metrics`)).text();
  expect(metricValue(slowMetrics, 'idempotency_requests_total', { outcome: 'lease_lost' })).toBe(1);
  expect(metricValue(slowMetrics, 'dynamo_conditional_write_rejected_total', { table: 'idempotency_keys', operation: 'complete' })).toBe(1);
  record(
    'orphaned worker: 3 s handler, 1 s lease; the successor claimed after 2.1 s; the orphan\'s completion was refused ' +
      '(lease_lost 1, conditional complete rejections 1), its caller got its own 201; replays return the successor\'s order. ' +
      `The handler ran twice (${orders.length} orders): a lease shorter than the handler cannot prevent that, only make it visible`,
  );
});

describe('throttling storm and outage', () => {
  let proxy: FaultProxy;
  afterEach(() => proxy?.stop());

  it('answers only 503s for faults, never runs twice, and resolves every key after recovery', async () => {
    const port = await freePort();
    await track(startDynaliteProcess(port));
    proxy = await startFaultProxy(`http://127.0.0.1:${port}`);
    const env = { ORDER_PROCESSING_DELAY_MS: '20', IDEMPOTENCY_PENDING_TTL_SECONDS: '5' };
    const apps: AppProc[] = await Promise.all([1, 2, 3].map(() => track(startDemo(proxy.endpoint, env))));

    const keys = Array.from({ length: 30 }, (_, i) => `storm-${i}`);
    let next = 0;
    const roundRobin = () => apps[next++ % apps.length].url;
    const clients: Array<Promise<Resolution & { key: string }>> = [];
    const send = (key: string) => clients.push(placeOrder(roundRobin, key, orderFor(key), 60_000).then((r) => ({ key, ...r })));

    keys.slice(0, 10).forEach(send);
    await sleep(300);
    proxy.mode = 'throttle';
    proxy.throttleFraction = 0.3;
    keys.forEach(send);
    await sleep(2000);
    proxy.mode = 'drop';
    const duringOutage = await Promise.all(keys.slice(0, 5).map((key) => fetch(`${roundRobin()}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `outage-${key}` },
      body: JSON.stringify(orderFor(`outage-${key}`)),
    }).then((r) => r.status)));
    keys.forEach(send);
    await sleep(2000);
    proxy.mode = 'pass';
    keys.forEach(send);
    const resolutions = await Promise.all(clients);

    expect(duringOutage).toEqual([503, 503, 503, 503, 503]);
    const orders = await ordersIn(`http://127.0.0.1:${port}`);
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
    const port = await freePort();
    const endpoint = `http://127.0.0.1:${port}`;
    let store = await track(startDynaliteProcess(port, dir));
    const app = await track(startDemo(endpoint));
    const keys = Array.from({ length: 10 }, (_, i) => `restart-${i}`);
    const before = await Promise.all(keys.map((key) => placeOrder(app.url, key, orderFor(key))));

    await store.kill('SIGKILL');
    const newKeyDuringRestart = await placeOrder(app.url, 'restart-new', orderFor('restart-new'), 0);
    const cachedDuringRestart = await placeOrder(app.url, 'restart-0', orderFor('restart-0'), 0);
    store = await track(startDynaliteProcess(port, dir));
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
        'completed one was replayed from the instance\'s cache; dynalite restarted on the same files; a new instance ' +
        '(empty cache) replayed all 10 keys byte-identical; still 10 orders',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
