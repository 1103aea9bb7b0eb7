/**
 * The tests Stryker runs against each mutant (`npm run test:mutation`): everything that exercises the protocol,
 * the repositories, keys, fingerprints and the codec, without the multi-second real-time lease tests (their
 * behaviour is covered with fake clocks elsewhere) and the observability suites.
 */
const base = require('./jest.config');
module.exports = {
  ...base,
  testPathIgnorePatterns: ['/node_modules/', 'lease-heartbeat', 'test/observability/', 'test/orders-api/'],
};
