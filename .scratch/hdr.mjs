import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
const app = spawn(process.execPath, ['dist/apps/orders-api/main.js'], { env: { ...process.env, PORT: '39111', MICROSERVICE_PORT: '39112', IDEMPOTENCY_STORE: 'memory', BENCH_ROUTES: '1' }, stdio: 'ignore' });
for (let i = 0; i < 100; i++) { try { await fetch('http://127.0.0.1:39111/bench/plain', { method: 'POST' }); break; } catch { await sleep(100); } }
for (const p of ['intercepted', 'idempotent']) {
  const r = await fetch(`http://127.0.0.1:39111/bench/${p}`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'k' + p }, body: '{"a":1}' });
  console.log(p, r.status, [...r.headers.entries()], await r.text());
}
app.kill();
