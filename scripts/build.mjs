// The builds behind `npm run build:lib` (the publishable package in libs/idempotency: CommonJS + type declarations,
// README, LICENSE, CHANGELOG) and `npm run build` (also the demo into dist/apps/orders-api).
//
// A process may be loading the output while another builds it (two `npm start` at the same moment), so the output is
// never deleted and never half-written: tsc compiles into a fresh directory beside it, then each file that changed is
// moved into place with one rename (atomic on one filesystem), and files tsc no longer emits are removed last.
//
// A target whose inputs (the sources, the tsconfig files, the lockfile, the copied documents, this script) hash as they
// did at its last build, and whose output is there, is not built again: the suites that run the built CLI each ask for
// a build.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

const TARGETS = {
  lib: () => {
    compile('libs/idempotency/tsconfig.lib.json', 'libs/idempotency/dist');
    copyFileSync(join(root, 'README.md'), join(root, 'libs/idempotency/README.md'));
    copyFileSync(join(root, 'LICENSE'), join(root, 'libs/idempotency/LICENSE'));
    copyFileSync(join(root, 'CHANGELOG.md'), join(root, 'libs/idempotency/CHANGELOG.md'));
  },
  app: () => compile('apps/orders-api/tsconfig.app.json', 'dist/apps/orders-api'),
};

function compile(project, outDir) {
  const target = join(root, outDir);
  mkdirSync(dirname(target), { recursive: true });
  const staging = mkdtempSync(`${target}.building-`);
  try {
    execFileSync(process.execPath, [tsc, '-p', join(root, project), '--outDir', staging], {
      stdio: 'inherit',
      cwd: root,
    });
    const emitted = new Set(files(staging));
    for (const file of emitted) {
      const to = join(target, file);
      if (existsSync(to) && readFileSync(to).equals(readFileSync(join(staging, file)))) continue;
      mkdirSync(dirname(to), { recursive: true });
      renameSync(join(staging, file), to);
    }
    for (const file of existsSync(target) ? files(target) : []) if (!emitted.has(file)) rmSync(join(target, file));
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Every file under `dir`, as paths relative to it. */
function files(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)));
}

const OUTPUTS = { lib: 'libs/idempotency/dist', app: 'dist/apps/orders-api' };
const INPUTS = [
  'libs/idempotency/src',
  'apps',
  'README.md',
  'LICENSE',
  'CHANGELOG.md',
  'package-lock.json',
  'scripts/build.mjs',
];

/** A hash of every input of a build: the files of INPUTS (folders whole) and every tsconfig*.json beside them. */
function inputsHash() {
  const hash = createHash('sha256');
  const tsconfigs = ['.', 'libs/idempotency', 'apps/orders-api'].flatMap((dir) =>
    readdirSync(join(root, dir))
      .filter((name) => /^tsconfig.*\.json$/.test(name))
      .map((name) => join(dir, name)),
  );
  for (const input of [...INPUTS, ...tsconfigs]) {
    const path = join(root, input);
    const each = statSync(path).isDirectory()
      ? files(path)
          .sort()
          .map((file) => join(input, file))
      : [input];
    for (const file of each) hash.update(`${file}\0${readFileSync(join(root, file), 'latin1')}\0`);
  }
  return hash.digest('hex');
}

const names = process.argv.slice(2);
const stamps = join(root, 'node_modules/.cache/build');
const hash = inputsHash();
for (const name of names.length > 0 ? names : Object.keys(TARGETS)) {
  if (!TARGETS[name]) throw new Error(`unknown build target ${name}; one of ${Object.keys(TARGETS).join(', ')}`);
  const stamp = join(stamps, name);
  if (existsSync(join(root, OUTPUTS[name])) && existsSync(stamp) && readFileSync(stamp, 'utf8') === hash) continue;
  TARGETS[name]();
  mkdirSync(stamps, { recursive: true });
  writeFileSync(stamp, hash);
}
