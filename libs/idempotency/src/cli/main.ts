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
  (code) => process.exit(code),
  (error) => {
    console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
    process.exit(1);
  },
);
