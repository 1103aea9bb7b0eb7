#!/usr/bin/env node
// npm run test:nest12: the whole suite again on NestJS 12. NestJS 12 and its companions (GraphQL's, Swagger's, the
// platforms) are installed from test/nest12 (its lockfile) into .cache/nest12. Jest resolves every package that tree
// holds from it and compiles NestJS 12's ES modules to CommonJS as they load (jest.nest12.config.js); the processes
// the suites start (the demo, crash and Lambda fixtures, the CLI) load it through require(esm) (test/support/run-ts.cjs,
// NEST_MODULES), which needs Node.js 22.12 or newer. test/nest12/which-nest checks that the suites meet NestJS 12.
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 12)) {
  console.error(`test:nest12 needs Node.js 22.12 or newer (require(esm)); this is ${process.version}`);
  process.exit(1);
}

const tree = join(root, '.cache/nest12');
mkdirSync(tree, { recursive: true });
for (const file of ['package.json', 'package-lock.json'])
  copyFileSync(join(root, 'test/nest12', file), join(tree, file));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const installed = join(tree, 'node_modules/.package-lock.json');
const wanted = readFileSync(join(tree, 'package-lock.json'), 'utf8');
if (!existsSync(installed) || !sameTree(readFileSync(installed, 'utf8'), wanted)) {
  execFileSync(npm, ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: tree, stdio: 'inherit' });
}
const env = { ...process.env, NEST_MODULES: join(tree, 'node_modules') };

// The redirect works, or nothing below proves anything.
const probe = execFileSync(
  process.execPath,
  [join(root, 'test/support/run-ts.cjs'), join(root, 'test/nest12/probe.ts')],
  {
    env,
    encoding: 'utf8',
  },
).trim();
const version = JSON.parse(readFileSync(join(probe, 'package.json'), 'utf8')).version;
if (!probe.startsWith(tree) || !version.startsWith('12.')) {
  console.error(`the processes do not load NestJS 12 (@nestjs/core ${version} from ${probe})`);
  process.exit(1);
}
console.log(`test:nest12: the suites' processes load NestJS ${version} from ${tree}`);

const jest = spawnSync(
  process.execPath,
  [join(root, 'node_modules/jest/bin/jest.js'), '--config', 'jest.nest12.config.js', ...process.argv.slice(2)],
  { cwd: root, env: { ...env, NEST_MAJOR: '12' }, stdio: 'inherit' },
);
process.exit(jest.status ?? 1);

/** Whether the installed tree is the one the lockfile describes (npm's own record of what it installed). */
function sameTree(installedLock, lock) {
  const packagesOf = (text) =>
    JSON.stringify(
      Object.entries(JSON.parse(text).packages ?? {})
        .filter(([path]) => path)
        .map(([path, { version }]) => [path, version])
        .sort(),
    );
  return packagesOf(installedLock) === packagesOf(lock);
}
