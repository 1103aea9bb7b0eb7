import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * InMemoryIdempotencyRepository keeps its memory bounded without a timer: 20,000 distinct keys that pass their TTL
 * leave the heap within 10 % of where it was. Measured in a child process with --expose-gc (Jest's workers have no
 * gc()); not timed.
 */
it('after 20,000 distinct keys past their TTL, the heap is back within 10 % of where it started', () => {
  const output = execFileSync(
    process.execPath,
    ['--expose-gc', join(__dirname, '../support/run-ts.cjs'), join(__dirname, 'in-memory-heap.script.ts')],
    {
      encoding: 'utf8',
    },
  );
  const { start, end, sizeAtStart, sizeAtEnd } = JSON.parse(output.trim().split('\n').pop()!);
  expect(sizeAtEnd).toBeLessThanOrEqual(sizeAtStart * 1.1);
  expect(end).toBeLessThanOrEqual(start * 1.1);
}, 60_000);
