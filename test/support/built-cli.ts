import { execFile, execFileSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'libs/idempotency/dist/cli/main.js');

/** Builds the library (`scripts/build.mjs lib`, skipped when its inputs are unchanged), so that its CLI can run. */
export function buildLibrary(): void {
  execFileSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), 'lib'], { cwd: ROOT, stdio: 'pipe' });
}

/** The built CLI with `args`, never looking for credentials off this machine: its exit code and what it printed. */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { ...process.env, AWS_EC2_METADATA_DISABLED: 'true', ...env } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    ),
  );
}
