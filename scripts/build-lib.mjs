// npm run build:lib: the publishable package in libs/idempotency (CommonJS + type declarations, README, LICENSE).
import { execFileSync } from 'node:child_process';
import { copyFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
rmSync('libs/idempotency/dist', { recursive: true, force: true });
execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'libs/idempotency/tsconfig.lib.json'], {
  stdio: 'inherit',
});
copyFileSync('README.md', 'libs/idempotency/README.md');
copyFileSync('LICENSE', 'libs/idempotency/LICENSE');
