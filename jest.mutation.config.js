/**
 * The tests Stryker runs against each mutant (`npm run test:mutation`): everything that exercises the protocol,
 * the repositories, keys, fingerprints and the codec, without the multi-second real-time lease tests (their
 * behaviour is covered with fake clocks elsewhere), the observability suites and DynamoDB Local.
 */
const base = require('./jest.config');
module.exports = {
  ...base,
  // No DynamoDB Local: Stryker runs Jest once per mutant, and the JVM would start each time.
  globalSetup: undefined,
  globalTeardown: undefined,
  testPathIgnorePatterns: ['/node_modules/', 'lease-heartbeat', 'test/observability/', 'test/orders-api/'],
};
