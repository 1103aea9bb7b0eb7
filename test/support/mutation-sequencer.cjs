/**
 * The test order of `npm run test:mutation` only: files that failed last time first (the previous mutant's killer is
 * likely to kill this one too), then the fastest first, so that with mutation-bail.environment.cjs a mutant is killed
 * by the cheapest test that can kill it. Jest's default runs the slowest first, which suits parallel runs, not this.
 */
const Sequencer = require('@jest/test-sequencer').default;

class FastFirstSequencer extends Sequencer {
  sort(tests) {
    const known = super.sort(tests); // fills test.duration from Jest's cache
    // Without a duration (a first run), a spec beside the code before an end-to-end suite.
    const rank = (test) => [this.hasFailed(test) ? 0 : 1, test.duration ?? (test.path.includes('/libs/') ? 0 : 1e9)];
    return [...known].sort((a, b) => {
      const [failedA, timeA] = rank(a);
      const [failedB, timeB] = rank(b);
      return failedA - failedB || timeA - timeB;
    });
  }
}

module.exports = FastFirstSequencer;
