// Runs one TypeScript file in a child process, compiled with swc as Jest compiles the suites (.swcrc: decorators and
// their metadata), for tests that need a process of their own (node flags such as --expose-gc, a Lambda container to
// freeze with SIGSTOP). Usage:
//   node --expose-gc test/support/run-ts.cjs path/to/script.ts [its arguments]
const { createHash } = require('node:crypto');
const { mkdirSync, readFileSync, renameSync, writeFileSync } = require('node:fs');
const Module = require('node:module');
const path = require('node:path');
const { transformSync, version: swcVersion } = require('@swc/core');

const root = path.resolve(__dirname, '../..');
const swcrcText = readFileSync(path.join(root, '.swcrc'), 'utf8');
const swcrc = JSON.parse(swcrcText);
// The suites start well over a hundred of these processes, each compiling the same sources: what swc made is kept in
// node_modules/.cache/run-ts by the hash of everything it depends on, and V8's own compile cache (Node.js 22.1+) keeps
// the bytecode of what they load.
const cache = path.join(root, 'node_modules/.cache/run-ts');
mkdirSync(cache, { recursive: true });
Module.enableCompileCache?.(path.join(cache, 'v8'));
const compile = Module._extensions['.js'];
Module._extensions['.ts'] = (module, filename) => {
  if (filename.includes(`${path.sep}node_modules${path.sep}`)) return compile(module, filename);
  module._compile(compiled(readFileSync(filename, 'utf8'), filename), filename);
};

/** swc's CommonJS for one source, from the cache when the same swc compiled the same text with the same settings. */
function compiled(source, filename) {
  const hash = createHash('sha256').update(`${swcVersion}\0${swcrcText}\0${filename}\0${source}`).digest('hex');
  const file = path.join(cache, `${hash}.js`);
  try {
    return readFileSync(file, 'utf8');
  } catch {
    const { code } = transformSync(source, { ...swcrc, filename });
    const partial = `${file}.${process.pid}`; // processes start together: each writes its own, then renames
    writeFileSync(partial, code);
    renameSync(partial, file);
    return code;
  }
}
// The library by its package name, from its sources, as Jest's moduleNameMapper gives it to the suites.
const packages = {
  'nestjs-dynamodb-idempotency': path.join(root, 'libs/idempotency/src/index.ts'),
  'nestjs-dynamodb-idempotency/testing': path.join(root, 'libs/idempotency/src/testing/index.ts'),
  'nestjs-dynamodb-idempotency/client': path.join(root, 'libs/idempotency/src/client/index.ts'),
  'nestjs-dynamodb-idempotency/lambda': path.join(root, 'libs/idempotency/src/lambda/index.ts'),
};
const resolve = Module._resolveFilename;
// NEST_MODULES: a node_modules folder holding another NestJS major (npm run test:nest12 installs NestJS 12 there):
// Nest and the packages it shares objects with (rxjs, reflect-metadata) are loaded from it, the rest as usual.
const nestModules = process.env.NEST_MODULES;
const fromNestTree = /^(@nestjs\/|rxjs(\/|$)|reflect-metadata$)/;
const nestParent = nestModules && {
  id: nestModules,
  filename: path.join(nestModules, 'index.js'),
  paths: Module._nodeModulePaths(nestModules),
};
Module._resolveFilename = function (request, parent, ...rest) {
  if (nestParent && fromNestTree.test(request)) return resolve.call(this, request, nestParent, ...rest);
  return resolve.call(this, packages[request] ?? request, parent, ...rest);
};
// The same for ES modules (an ESM-only package of the workspace, such as @nestjs/bullmq, importing Nest): they are
// resolved by the ESM loader, whose hooks Node.js 22.15 and later take synchronously.
if (nestParent && Module.registerHooks) {
  const nestParentUrl = require('node:url').pathToFileURL(nestParent.filename).href;
  Module.registerHooks({
    resolve: (specifier, context, nextResolve) =>
      nextResolve(specifier, fromNestTree.test(specifier) ? { ...context, parentURL: nestParentUrl } : context),
  });
}
process.argv.splice(1, 1); // [node, script, its arguments]: as if node ran the script itself
require(path.resolve(process.argv[1]));
