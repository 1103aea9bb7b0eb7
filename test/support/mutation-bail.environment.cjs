/**
 * The test environment of `npm run test:mutation` only: Jest's node environment that stops testing a mutant after its
 * first failing test (or hook). Stryker counts a mutant killed by any failing test, but runs Jest without `bail` (Jest
 * has no programmatic bail), so every mutant ran all the tests covering it: minutes for a mutant of a file every test
 * reaches. From the first failure on, the rest of that mutant's run is skipped (tests and their describe blocks, so
 * no beforeAll starts an app). Verdicts do not change: a killed mutant is still killed, a survivor still runs every
 * test; a mutant that made a later test hang is now killed by the earlier failure instead of timing out.
 * Stryker runs Jest in band in its worker and names the mutant under test in `__STRYKER_ACTIVE_MUTANT__` (unset in
 * the dry run, which must run everything).
 */
const { TestEnvironment } = require('jest-environment-node');

const FAILED_MUTANT = Symbol.for('idempotency.mutation.failedMutant');

class MutationBailEnvironment extends TestEnvironment {
  handleTestEvent(event) {
    const mutant = process.env.__STRYKER_ACTIVE_MUTANT__;
    if (mutant === undefined) return;
    if (event.name === 'test_fn_failure' || event.name === 'hook_failure') process[FAILED_MUTANT] = mutant;
    if (process[FAILED_MUTANT] !== mutant) return;
    if (event.name === 'run_describe_start') event.describeBlock.mode = 'skip';
    // A test that already carries an error (its block's beforeAll failed) must still be reported failed: skipped, it
    // would hide the failure that killed the mutant.
    if (event.name === 'test_start' && event.test.errors.length === 0) event.test.mode = 'skip';
  }
}

module.exports = MutationBailEnvironment;
