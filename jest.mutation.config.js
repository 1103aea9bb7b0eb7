/**
 * The tests Stryker runs against each mutant (`npm run test:mutation`): everything that exercises the protocol,
 * the repositories, keys, fingerprints and the codec (the observability suites too: logs, spans and counters are what
 * operators read), without the multi-second real-time lease tests over HTTP (the heartbeat's behaviour is covered on
 * fake timers in lease-heartbeat.spec.ts) and the demo's own suites. DynamoDB Local runs when
 * scripts/test-mutation.mjs started one (DYNAMODB_LOCAL_ENDPOINT).
 */
const base = require('./jest.config');
module.exports = {
  ...base,
  // Stryker runs Jest once per mutant: the JVM would start each time. scripts/test-mutation.mjs starts it once.
  globalSetup: undefined,
  globalTeardown: undefined,
  testPathIgnorePatterns: ['/node_modules/', 'test/http/lease-heartbeat', 'test/orders-api/'],
};
