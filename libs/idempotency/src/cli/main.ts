#!/usr/bin/env node
import { createInterface } from 'node:readline/promises';
import { runCli } from './run-cli';

runCli(process.argv.slice(2), {
  log: (line) => console.log(line),
  error: (line) => console.error(line),
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
}).then(
  (code) => exitOnceWritten(code),
  (error) => {
    console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
    exitOnceWritten(1);
  },
);

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
