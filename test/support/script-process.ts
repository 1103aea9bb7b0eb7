import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';

/** A TypeScript script in a process of its own (a worker, a consumer), ready once it sent its first IPC message. */
export interface ScriptProcess {
  child: ChildProcess;
  /** Its first IPC message (what it says once ready: a port, a URL). */
  ready: unknown;
  /** What it printed so far, stdout and stderr together. */
  output(): string;
  exited: Promise<void>;
  /** SIGKILL (unless it already ended), then wait for the exit. */
  kill(): Promise<void>;
}

const ROOT = join(__dirname, '..', '..');

/** Starts `script` (a path) through run-ts.cjs with `env` added, and waits for its ready message. */
export async function startScript(script: string, env: Record<string, string>): Promise<ScriptProcess> {
  const child = fork(join(ROOT, 'test/support/run-ts.cjs'), [script], {
    cwd: ROOT,
    env: { ...process.env, AWS_EC2_METADATA_DISABLED: 'true', NODE_NO_WARNINGS: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = await new Promise<unknown>((resolve, reject) => {
    child.once('message', resolve);
    void exited.then(() => reject(new Error(`${script} exited before it was ready:\n${output}`)));
  });
  return {
    child,
    ready,
    output: () => output,
    exited,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
