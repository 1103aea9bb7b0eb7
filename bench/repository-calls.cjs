// The SDK side of one new key, in-process and without a network: the floor route's two calls (the module's requests,
// sent by hand) against the module's repository (claim, complete), on one DynamoDB client whose HTTP handler answers `{}` at once.
// Rounds alternate; prints JSON: CPU µs per new key, per round. Run by bench.mjs (after `npm run build`).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
const { randomUUID } = require('node:crypto');
const { DynamoDbIdempotencyRepository } = require('../libs/idempotency/dist');
const { instantClient } = require('./instant-client.cjs');
const { floorCalls } = require('../dist/apps/orders-api/bench/floor-calls'); // the calls /bench/floor makes

const ROUNDS = Number(process.env.ROUNDS ?? 9);
const CALLS = Number(process.env.CALLS ?? 3000);
const client = instantClient();
const repository = new DynamoDbIdempotencyRepository({ client, tableName: 't' });
const response = { statusCode: 200, headers: {}, body: { ok: true, received: { item: 'book', quantity: 1 } } };

async function floor(i) {
  const pk = `POST /bench/floor#${i}`;
  const now = Math.floor(Date.now() / 1000);
  const claimToken = randomUUID();
  await floorCalls.claim(client, 't', pk, claimToken, now);
  await floorCalls.complete(client, 't', pk, claimToken, now, response.body);
}

async function module_(i) {
  const key = `POST /bench/idempotent#${i}`;
  const { claimToken } = await repository.claim({ key, fingerprint: 'f'.repeat(64), leaseSeconds: 60 });
  await repository.complete({ key, claimToken, response, ttlSeconds: 86_400 });
}

(async () => {
  const runs = { floor: [], module: [] };
  for (let round = 0; round <= ROUNDS; round++) {
    for (const [name, call] of round % 2
      ? [
          ['module', module_],
          ['floor', floor],
        ]
      : [
          ['floor', floor],
          ['module', module_],
        ]) {
      const started = process.cpuUsage();
      for (let i = 0; i < CALLS; i++) await call(`${round}-${i}`);
      const used = process.cpuUsage(started);
      if (round > 0) runs[name].push((used.user + used.system) / CALLS); // round 0 warms the JIT up
    }
  }
  console.log(JSON.stringify(runs));
})();
