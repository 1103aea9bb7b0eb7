// A small idempotent payments API for the conformance kit's tests: right (`--flaw none`), or wrong in one classic way.
//
//   node test/conformance/flawed-server.mjs --port N [--flaw NAME] [--state FILE] [--log FILE]
//
// POST /charges {amount, fail?} charges once per Idempotency-Key (a 201 with a new charge id and a Location), a body
// with `fail: true` answers 500; GET /charges?key=K lists the charges made under K; GET /health answers 200. With
// --state, charges and completed answers survive a restart (written together, atomically, by rename). With --log, each
// request is appended to FILE as a line: method, path, key header and a SHA-256 of the body.
//
// The flaws:
//   check-then-act     reads the key, then (50 ms later) writes it: no conditional write, concurrent requests all run
//   unfenced-lock      a lock whose lease (300 ms) is shorter than the handler (1,200 ms): a retry takes the key over
//                      and runs again, and the first owner's completion overwrites the second's without a check
//   lock-timeout       the lock expires on a timer (300 ms) while the handler (1,200 ms) still runs: a retry runs again
//   replays-mismatch   no fingerprint: the same key with another body gets the first answer
//   stores-5xx         a 500 is stored and replayed, where the module releases the key
//   loses-completion   the charge is written, then its answer a second later: a crash between them loses the answer
//   completes-first    the answer is written, then the charge a second later: a crash between them keeps an answer
//                      whose charge never happened
import { createHash, randomUUID } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { port: { type: 'string' }, flaw: { type: 'string' }, state: { type: 'string' }, log: { type: 'string' } },
});
const flaw = values.flaw ?? 'none';
const FLAWS = [
  'none',
  'check-then-act',
  'unfenced-lock',
  'lock-timeout',
  'replays-mismatch',
  'stores-5xx',
  'loses-completion',
  'completes-first',
];
if (!FLAWS.includes(flaw)) throw new Error(`--flaw must be one of ${FLAWS.join(', ')}`);
const slow = flaw === 'unfenced-lock' || flaw === 'lock-timeout';
const HANDLER_MS = slow ? 1200 : 50;
const LEASE_MS = 300;

/** Durable: the charges, and each completed key's answer. In memory only: keys in flight. */
const state =
  values.state && existsSync(values.state)
    ? JSON.parse(readFileSync(values.state, 'utf8'))
    : { charges: [], answers: {} };
const inFlight = new Map(); // record key → { fingerprint, owner, until }
const save = () => {
  if (!values.state) return;
  writeFileSync(`${values.state}.tmp`, JSON.stringify(state));
  renameSync(`${values.state}.tmp`, values.state);
};

const canonical = (value) =>
  Array.isArray(value)
    ? `[${value.map(canonical).join(',')}]`
    : value && typeof value === 'object'
      ? `{${Object.keys(value)
          .sort()
          .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`)
          .join(',')}}`
      : JSON.stringify(value);

function send(response, status, body, headers = {}) {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json', ...headers }).end(text);
}
const problem = (response, status, type, headers = {}) =>
  send(response, status, { type, title: type, status }, { 'content-type': 'application/problem+json', ...headers });

/** The key as the IETF draft sends it (a structured-field string, quotes optional); `undefined` when invalid. */
function keyOf(header) {
  if (header === undefined) return { missing: true };
  let key = header.trim();
  if (/^".*"$/.test(key)) key = key.slice(1, -1);
  if (key.length === 0 || key.length > 255 || key.includes(',')) return { invalid: true };
  return { key };
}

async function charge(request, response, body) {
  const { key, missing, invalid } = keyOf(request.headers['idempotency-key']);
  if (missing) return problem(response, 400, 'key-missing');
  if (invalid) return problem(response, 400, 'key-invalid');
  const recordKey = `POST /charges#${key}`;
  const fingerprint = flaw === 'replays-mismatch' ? '' : canonical(body);
  const done = state.answers[recordKey];
  if (done) {
    if (done.fingerprint !== fingerprint) return problem(response, 422, 'fingerprint-mismatch');
    return send(response, done.status, done.body, { ...done.headers, 'idempotent-replayed': 'true' });
  }
  const held = inFlight.get(recordKey);
  if (flaw === 'check-then-act') await sleep(50); // read, then (later) write without a condition
  const now = Date.now();
  if (held && (!slow || held.until > now)) {
    if (held.fingerprint !== fingerprint) return problem(response, 422, 'fingerprint-mismatch');
    return problem(response, 409, 'in-flight', { 'retry-after': '1' });
  }
  const owner = randomUUID();
  inFlight.set(recordKey, { fingerprint, owner, until: now + LEASE_MS });
  if (flaw === 'lock-timeout')
    setTimeout(() => inFlight.get(recordKey)?.owner === owner && inFlight.delete(recordKey), LEASE_MS);
  await sleep(HANDLER_MS);
  if (body.fail === true) {
    if (flaw === 'stores-5xx')
      state.answers[recordKey] = { fingerprint, status: 500, body: { error: 'charge failed' }, headers: {} };
    save();
    if (inFlight.get(recordKey)?.owner === owner) inFlight.delete(recordKey);
    return send(response, 500, { error: 'charge failed' });
  }
  const made = { chargeId: randomUUID(), amount: body.amount, key };
  const answer = { fingerprint, status: 201, body: made, headers: { location: `/charges/${made.chargeId}` } };
  if (flaw === 'completes-first') {
    state.answers[recordKey] = answer;
    save(); // the answer is durable; its charge is not yet
    await sleep(1000);
  }
  state.charges.push(made);
  if (flaw === 'loses-completion') {
    save(); // the charge is durable; its answer is not yet
    await sleep(1000);
  }
  // Fenced: only the owner completes (the unfenced lock completes whoever it is, over a successor's answer).
  if (flaw === 'unfenced-lock' || !state.answers[recordKey]) state.answers[recordKey] = answer;
  save();
  if (inFlight.get(recordKey)?.owner === owner) inFlight.delete(recordKey);
  send(response, 201, made, answer.headers);
}

const server = createServer((request, response) => {
  const url = new URL(request.url, 'http://localhost');
  if (request.method === 'GET' && url.pathname === '/health') return send(response, 200, { ok: true });
  if (request.method === 'GET' && url.pathname === '/charges')
    return send(
      response,
      200,
      state.charges.filter((each) => each.key === url.searchParams.get('key')),
    );
  if (request.method !== 'POST' || url.pathname !== '/charges') return send(response, 404, { error: 'not found' });
  const chunks = [];
  let size = 0;
  request.on('data', (chunk) => {
    size += chunk.length;
    if (size <= 1_048_576) chunks.push(chunk);
  });
  request.on('end', () => {
    if (values.log) {
      const digest = createHash('sha256').update(Buffer.concat(chunks)).digest('hex');
      appendFileSync(values.log, `${request.method} ${url.pathname} ${request.headers['idempotency-key']} ${digest}\n`);
    }
    if (size > 1_048_576) return problem(response, 413, 'too-large');
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return problem(response, 400, 'not-json');
    }
    if (typeof body?.amount !== 'number') return problem(response, 400, 'amount-required');
    charge(request, response, body).catch((error) => send(response, 500, { error: String(error) }));
  });
});
server.listen(Number(values.port ?? 0), '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${server.address().port}\n`);
});
