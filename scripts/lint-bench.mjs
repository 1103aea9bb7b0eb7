// Part of `npm run lint`: bench/RESULTS.md names the commit it measured; once a file on the request path (the
// protocol, the adapters, the DynamoDB requests) changed after that commit, the figures describe code that no longer
// runs, and this fails until `npm run bench` is run again and its RESULTS.md committed.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** Where a change can move the figures: every request goes through these. Tests beside them do not count. */
export const REQUEST_PATH = [
  'libs/idempotency/src/protocol',
  'libs/idempotency/src/contexts',
  'libs/idempotency/src/dynamodb',
];

/** The request-path files changed since `bench/RESULTS.md`'s commit, or why it cannot tell (a reason to fail). */
export function staleness(results = readFileSync('bench/RESULTS.md', 'utf8')) {
  const measured = /at commit `([0-9a-f]{40})( \+ uncommitted changes)?`/.exec(results);
  if (!measured) return { problem: 'bench/RESULTS.md names no commit (`at commit `<sha>``): run npm run bench' };
  if (measured[2]) return { problem: `bench/RESULTS.md measured ${measured[1]} with uncommitted request-path changes` };
  const git = (...args) => execFileSync('git', args, { encoding: 'utf8' }).trim();
  try {
    git('cat-file', '-e', `${measured[1]}^{commit}`);
  } catch {
    // A shallow clone cannot tell; a full one that lacks it is the odd case (a rewritten history): say so, pass.
    return { commit: measured[1], unknown: true, changed: [] };
  }
  const changed = git('diff', '--name-only', measured[1], 'HEAD', '--', ...REQUEST_PATH)
    .split('\n')
    .filter((file) => file && !file.endsWith('.spec.ts'));
  return { commit: measured[1], changed };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { problem, commit, changed, unknown } = staleness();
  if (unknown) {
    console.log(
      `bench: cannot tell whether bench/RESULTS.md is stale: this clone lacks ${commit.slice(0, 7)} (shallow?)`,
    );
    process.exit(0);
  }
  if (problem) {
    console.error(`bench: ${problem}`);
    process.exit(1);
  }
  if (changed.length > 0) {
    console.error(
      `bench/RESULTS.md is stale: it measured ${commit.slice(0, 7)}, and the request path changed since:\n` +
        changed.map((file) => `  ${file}`).join('\n') +
        '\nRun npm run bench (on a quiet machine) and commit bench/RESULTS.md with the change.',
    );
    process.exit(1);
  }
  console.log(`bench ok: bench/RESULTS.md measured ${commit.slice(0, 7)}, the request path unchanged since`);
}
