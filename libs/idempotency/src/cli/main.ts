#!/usr/bin/env node
import { runTableCli } from './table-cli';

runTableCli(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
    process.exit(1);
  },
);
