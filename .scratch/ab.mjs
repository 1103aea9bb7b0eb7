// Quick A/B: one dynalite + one app, routes alternated ROUNDS times; median CPU µs/request and req/s per route.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { freePort } from '../scripts/free-port.mjs';
const routes = (process.env.ROUTES ?? '/bench/floor,/bench/idempotent').split(',');
const ROUNDS = Number(process.env.ROUNDS ?? 5), DUR = Number(process.env.DUR ?? 4), KIND = process.env.KIND ?? 'fresh';
const body = JSON.stringify({ item: 'book', quantity: 1 });
const procs = []; process.on('exit', () => procs.forEach((c) => c.kill('SIGKILL')));
function start(args, env = {}) { const c = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }); let o = ''; c.stdout.on('data', (d) => (o += d)); c.stderr.on('data', (d) => (o += d)); c.output = () => o; procs.push(c); return c; }
async function waitFor(url, c) { for (let i = 0; i < 300; i++) { if (c.exitCode !== null) throw new Error(c.output()); try { await fetch(url, { method: 'POST' }); return; } catch { await sleep(100); } } throw new Error('no'); }
const stats = async (url) => (await (await fetch(`${url}/bench/stats`)).json());
async function load(url, path, prefix, duration, replay) {
  let n = 0; const before = await stats(url);
  const r = await autocannon({ url, connections: 20, duration, requests: [{ method: 'POST', path, headers: { 'content-type': 'application/json' }, body, setupRequest: (q) => ({ ...q, headers: { ...q.headers, 'idempotency-key': replay ? `${prefix}-${n++ % 200}` : `${prefix}-${n++}` } }) }] });
  const after = await stats(url);
  return { rps: r.requests.average, cpu: (after.cpuMicros - before.cpuMicros) / r.requests.total, bad: r.non2xx + r.errors };
}
let endpoint = process.env.ENDPOINT;
if (!endpoint) { const dp = await freePort(); const dyn = start(['node_modules/dynalite/cli.js', '--port', String(dp)]); endpoint = `http://127.0.0.1:${dp}`; await waitFor(endpoint, dyn); }
const port = await freePort();
const app = start(['dist/apps/orders-api/main.js'], { PORT: String(port), MICROSERVICE_PORT: String(await freePort()), DYNAMODB_ENDPOINT: endpoint, BENCH_ROUTES: '1', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', IDEMPOTENCY_REPLAY_CACHE: process.env.CACHE ?? '1' });
const url = `http://127.0.0.1:${port}`;
await waitFor(`${url}/bench/plain`, app);
for (const p of routes) await load(url, p, `boot${p}`, 3);
const res = Object.fromEntries(routes.map((p) => [p, []]));
for (let r = 0; r < ROUNDS; r++) for (const p of (r % 2 ? [...routes].reverse() : routes)) {
  await load(url, p, `w${r}${p}`, 1);
  if (KIND === 'replay') await load(url, p, `r${r}${p}`, 1, true);
  const x = await load(url, p, `r${r}${p}`, DUR, KIND === 'replay');
  res[p].push(x);
}
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
for (const p of routes) console.log(p.padEnd(22), 'cpu', med(res[p].map((x) => x.cpu)).toFixed(0), 'rps', med(res[p].map((x) => x.rps)).toFixed(0), 'cpus', res[p].map((x) => x.cpu.toFixed(0)).join(' '), 'bad', res[p].reduce((s, x) => s + x.bad, 0));
const [a, b] = routes;
console.log('cpu ratio per round', res[b].map((x, i) => (x.cpu / res[a][i].cpu).toFixed(2)).join(' '), 'median', med(res[b].map((x, i) => x.cpu / res[a][i].cpu)).toFixed(3));
process.exit(0);
