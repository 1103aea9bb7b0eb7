import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { post } from '../support/app';

const ROOT = join(__dirname, '..', '..');

/**
 * Outcome listeners that fail, in an app's own process: an async `onOutcome` whose promise rejects, and
 * diagnostics-channel subscribers that throw or reject. The process lives on, answers are unchanged, and the failures
 * are logged (at most once a minute).
 */
describe('outcome listeners that fail', () => {
  let child: ChildProcess;
  let output = '';
  let url: string;
  let exited: Promise<number | null>;

  beforeAll(async () => {
    child = fork(join(ROOT, 'test/support/run-ts.cjs'), [join(__dirname, 'failing-listeners.script.ts')], {
      cwd: ROOT,
      env: {
        ...process.env,
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        NODE_NO_WARNINGS: '1',
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    url = await new Promise<string>((resolve, reject) => {
      const look = () => {
        const found = /listening (http:\/\/\S+)/.exec(output);
        if (found) resolve(found[1].replace('[::1]', '127.0.0.1'));
      };
      child.stdout!.on('data', look);
      void exited.then(() => reject(new Error(`the app exited before it listened:\n${output}`)));
    });
  }, 30_000);

  afterAll(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });

  it('keeps the process alive and every answer unchanged', async () => {
    const key = `listeners-${process.pid}-${Date.now()}`;
    const first = await post(`${url}/orders`, { amount: 3 }, { 'Idempotency-Key': key });
    expect(first.status).toBe(201);
    // The rejections happen after the answer: give them time to end the process, if they could.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const replay = await post(`${url}/orders`, { amount: 3 }, { 'Idempotency-Key': key });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(first.text);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(child.exitCode).toBeNull();
    expect(output).not.toMatch(/Unhandled|uncaught/i);
    // Six failures in all (three listeners, two calls): one line, naming the first that failed.
    const lines = output
      .split('\n')
      .filter((line) => line.includes('listener errors are logged at most once a minute'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('a subscriber of the outcome channel failed');
    expect(output).toContain('Error: subscriber threw');
  });
});
