#!/usr/bin/env node
import { createInterface } from 'node:readline/promises';

const argv = process.argv.slice(2);
// The conformance kit is loaded alone: it runs where NestJS and the AWS SDK, which the table commands need, are not
// installed (`npx nestjs-dynamodb-idempotency conformance …` in an empty folder).
const run =
  argv[0] === 'conformance'
    ? import('../conformance/run').then(({ runConformance }) => runConformance(argv.slice(1), conformanceOutput()))
    : import('./run-cli').then(({ runCli }) => runCli(argv, cliOutput()));
run.then(
  (code) => exitOnceWritten(code),
  (error: unknown) => {
    console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
    exitOnceWritten(1);
  },
);

function cliOutput() {
  return {
    log: (line: string) => console.log(line),
    error: (line: string) => console.error(line),
    ...(process.stdin.isTTY
      ? {
          confirm: async (question: string) => {
            const terminal = createInterface({ input: process.stdin, output: process.stdout });
            try {
              return /^y(es)?$/i.test((await terminal.question(question)).trim());
            } finally {
              terminal.close();
            }
          },
        }
      : {}),
  };
}

/** Results on stdout; the progress line on stderr, rewritten in place on a terminal. */
function conformanceOutput() {
  const terminal = process.stderr.isTTY;
  const clear = () => terminal && process.stderr.write('\r\x1b[K');
  return {
    log: (line: string) => (clear(), console.log(line)),
    error: (line: string) => (clear(), console.error(line)),
    progress: (line: string) =>
      terminal ? process.stderr.write(`\r\x1b[K${line.slice(0, process.stderr.columns - 1)}`) : console.error(line),
  };
}

/**
 * Exits once everything written has left the process: to a pipe, stdout is written asynchronously, and a plain
 * `process.exit` drops what is still queued (a long `keys:list` read by another program ended part-way, exit 0).
 */
function exitOnceWritten(code: number): void {
  let open = 2;
  const written = () => {
    if (--open === 0) process.exit(code);
  };
  process.stdout.write('', written);
  process.stderr.write('', written);
}
