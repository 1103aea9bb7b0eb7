// Differential profile: one app under --cpu-prof, routes run in turn; self time per request per frame, compared.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { freePort } from '../scripts/free-port.mjs';
const routes = (process.env.ROUTES ?? '/bench/floor,/bench/idempotent').split(',');
const kind = process.env.KIND ?? 'fresh';
const DUR = Number(process.env.DUR ?? 8);
const body = JSON.stringify({ item: 'book', quantity: 1 });
const procs = [];
process.on('exit', () => procs.forEach((c) => c.kill('SIGKILL')));
function start(args, env = {}, nodeArgs = []) {
  const c = spawn(process.execPath, [...nodeArgs, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = ''; c.stdout.on('data', (d) => (out += d)); c.stderr.on('data', (d) => (out += d)); c.output = () => out; procs.push(c); return c;
}
async function waitFor(url, c) { for (let i = 0; i < 300; i++) { if (c.exitCode !== null) throw new Error(c.output()); try { await fetch(url, { method: 'POST' }); return; } catch { await sleep(100); } } throw new Error('no'); }
const stats = async (url) => (await (await fetch(`${url}/bench/stats`)).json());
async function load(url, path, prefix, duration, replay) {
  let n = 0;
  const before = await stats(url);
  const r = await autocannon({ url, connections: 20, duration, requests: [{ method: 'POST', path, headers: { 'content-type': 'application/json' }, body,
    setupRequest: (q) => ({ ...q, headers: { ...q.headers, 'idempotency-key': replay ? `${prefix}-${n++ % 200}` : `${prefix}-${n++}` } }) }] });
  const after = await stats(url);
  return { rps: r.requests.average, total: r.requests.total, cpu: (after.cpuMicros - before.cpuMicros) / r.requests.total, window: [before.monotonicMicros, after.monotonicMicros], non2xx: r.non2xx };
}
const dp = await freePort();
const dyn = start(['node_modules/dynalite/cli.js', '--port', String(dp)]);
const endpoint = `http://127.0.0.1:${dp}`;
await waitFor(endpoint, dyn);
const dir = mkdtempSync(join(tmpdir(), 'dp-'));
const port = await freePort();
const app = start(['dist/apps/orders-api/main.js'], { PORT: String(port), MICROSERVICE_PORT: String(await freePort()), DYNAMODB_ENDPOINT: endpoint, BENCH_ROUTES: '1', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', IDEMPOTENCY_REPLAY_CACHE: process.env.CACHE ?? '1' },
  process.env.NOPROF ? [] : ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${process.env.INTERVAL ?? 1000}`]);
const url = `http://127.0.0.1:${port}`;
await waitFor(`${url}/bench/plain`, app);
const runs = {};
for (const round of [0, 1]) for (const path of routes) {
  await load(url, path, `w${round}${path}`, 3);
  if (kind === 'replay') await load(url, path, `r${round}${path}`, 1, true);
  const run = await load(url, path, `r${round}${path}`, DUR, kind === 'replay');
  if (round === 1) runs[path] = run;
  console.log(round, path, run.rps.toFixed(0), 'req/s', run.cpu.toFixed(0), 'µs/req', run.non2xx);
}
if (process.env.NOPROF) process.exit(0);
const exited = new Promise((r) => app.once('exit', r));
await fetch(`${url}/bench/exit`, { method: 'POST' });
await exited;
const [file] = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
const { nodes, samples, timeDeltas, startTime } = JSON.parse(readFileSync(join(dir, file), 'utf8'));
const byId = new Map(nodes.map((n) => [n.id, n]));
const parent = new Map(); for (const n of nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const frameOf = (n) => { const { functionName, url, lineNumber } = n.callFrame; return `${functionName || '(anon)'} ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(dist|libs)\//, '$1/')}:${lineNumber + 1}`; };
const self = {}, incl = {}; const callers = new Map(); const CALLERS = process.env.CALLERS && new RegExp(process.env.CALLERS);
for (const p of routes) { self[p] = new Map(); incl[p] = new Map(); }
let t = startTime;
samples.forEach((id, i) => {
  t += timeDeltas[i];
  const d = timeDeltas[i + 1] ?? 0;
  for (const p of routes) {
    const w = runs[p].window;
    if (t < w[0] || t > w[1]) continue;
    const per = d / runs[p].total;
    const f = frameOf(byId.get(id));
    self[p].set(f, (self[p].get(f) ?? 0) + per);
    if (CALLERS && p === routes[1] && CALLERS.test(f)) { const chain = []; for (let x = parent.get(id), k = 0; x !== undefined && k < 8; x = parent.get(x), k++) chain.push(frameOf(byId.get(x))); const c = f + ' <- ' + chain.join(' <- '); callers.set(c, (callers.get(c) ?? 0) + per); }
    const seen = new Set();
    for (let x = id; x !== undefined; x = parent.get(x)) { const g = frameOf(byId.get(x)); if (seen.has(g)) continue; seen.add(g); incl[p].set(g, (incl[p].get(g) ?? 0) + per); }
  }
});
const [a, b] = routes;
const sum = (m) => [...m.values()].reduce((s, v) => s + v, 0);
console.log(`profiled µs/req ${a}: ${sum(self[a]).toFixed(0)}  ${b}: ${sum(self[b]).toFixed(0)}`);
const keys = new Set([...self[a].keys(), ...self[b].keys()]);
const diff = [...keys].map((k) => [k, (self[b].get(k) ?? 0) - (self[a].get(k) ?? 0), self[b].get(k) ?? 0]).sort((x, y) => y[1] - x[1]);
const pkg = (f) => { const loc = f.split(' ').pop(); if (loc.startsWith('libs/')) return 'module'; if (loc.startsWith('dist/')) return 'demo'; if (loc.startsWith('node:')) return 'node'; const m = /^((?:@[^/]+\/)?[^/:]+)\//.exec(loc); return m ? m[1] : f; };
for (const p of routes) { const g = new Map(); for (const [k, v] of self[p]) g.set(pkg(k), (g.get(pkg(k)) ?? 0) + v); console.log(p, [...g.entries()].sort((x, y) => y[1] - x[1]).slice(0, 22).map(([k, v]) => `${k} ${v.toFixed(1)}`).join('; ')); }
console.log('--- self diff (b - a), top 40');
for (const [k, d, v] of diff.slice(0, 40)) console.log(d.toFixed(1).padStart(7), v.toFixed(1).padStart(7), k);
console.log('--- inclusive in b, module frames');
for (const [k, v] of [...incl[b].entries()].filter(([k]) => k.includes('libs/') || k.includes('dist/')).sort((x, y) => y[1] - x[1]).slice(0, Number(process.env.TOPN ?? 40))) console.log(v.toFixed(1).padStart(7), k);
for (const [c, v] of [...callers.entries()].sort((x, y) => y[1] - x[1]).slice(0, 12)) console.log(v.toFixed(1), c);
process.exit(0);
