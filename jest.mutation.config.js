/**
 * The tests Stryker runs against each mutant (`npm run test:mutation`): everything that exercises the protocol,
 * the repositories, keys, fingerprints and the codec in the Jest process (the observability suites too: logs, spans
 * and counters are what operators read). Left out: the multi-second real-time lease tests over HTTP (the heartbeat's
 * behaviour is covered on fake timers in lease-heartbeat.spec.ts), the demo's own suites, and the suites whose
 * module runs in child processes (Lambda containers, crash tests, CLIs, the heap check, the docs compiler): Stryker
 * sees no coverage there, so they would only slow every run. DynamoDB Local runs when
 * scripts/test-mutation.mjs started one (DYNAMODB_LOCAL_ENDPOINT).
 */
const { join } = require('node:path');
const base = require('./jest.config');
module.exports = {
  ...base,
  // Each mutant's run stops at its first failing test, the fastest tests first (see each file's comment).
  testEnvironment: join(__dirname, 'test/support/mutation-bail.environment.cjs'),
  testSequencer: join(__dirname, 'test/support/mutation-sequencer.cjs'),
  // Stryker runs Jest once per mutant: the JVM would start each time. scripts/test-mutation.mjs starts it once.
  globalSetup: undefined,
  globalTeardown: undefined,
  testPathIgnorePatterns: [
    '/node_modules/',
    'test/http/lease-heartbeat',
    'test/orders-api/',
    'test/lambda/deadline',
    'test/lambda/lambda-handler',
    'test/optimistic/crash',
    'test/steps/steps-crash',
    'test/steps/steps-interrupted',
    'test/steps/steps-lambda',
    'test/operations/admin-cli',
    'test/operations/reconcile-cli',
    'test/real-app/in-memory-heap',
    'test/docs/',
  ],
};
