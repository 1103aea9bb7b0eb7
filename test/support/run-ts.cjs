// Runs one TypeScript file in a child process, compiled with swc as Jest compiles the suites (.swcrc: decorators and
// their metadata), for tests that need node flags Jest's workers do not have (--expose-gc). Usage:
//   node --expose-gc test/support/run-ts.cjs path/to/script.ts
const { readFileSync } = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const { transformSync } = require('@swc/core');

const root = path.resolve(__dirname, '../..');
const swcrc = JSON.parse(readFileSync(path.join(root, '.swcrc'), 'utf8'));
const compile = Module._extensions['.js'];
Module._extensions['.ts'] = (module, filename) => {
  if (filename.includes(`${path.sep}node_modules${path.sep}`)) return compile(module, filename);
  const { code } = transformSync(readFileSync(filename, 'utf8'), { ...swcrc, filename });
  module._compile(code, filename);
};
require(path.resolve(process.argv[2]));
