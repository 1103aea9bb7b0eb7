import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const ROOT = join(__dirname, '..', '..');

/** The demo (apps/orders-api) in a process of its own, run from its sources as the suites compile them. */
export interface DemoProcess {
  url: string;
  child: ChildProcess;
  /** What it printed so far (for a failure's message). */
  output(): string;
  /** Stops it (SIGKILL: as a crash, nothing runs on the way out) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts the demo on ports the system picks, with `env` over a quiet default (`LOG_LEVEL=log`, no reconciler), and
 * waits for the URL it prints. The SDK never looks for credentials off this machine.
 */
export async function startDemoProcess(env: Record<string, string>, timeoutMs = 30_000): Promise<DemoProcess> {
  const child = fork(join(ROOT, 'test/support/run-ts.cjs'), [join(ROOT, 'apps/orders-api/src/main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: '0',
      MICROSERVICE_PORT: '0',
      LOG_LEVEL: 'log',
      RECONCILE_INTERVAL_SECONDS: '0',
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      NODE_NO_WARNINGS: '1',
      NO_COLOR: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the demo did not start in ${timeoutMs} ms:\n${output}`)),
      timeoutMs,
    );
    const look = () => {
      const found = /Orders API listening on (http:\/\/[\w.:[\]-]+)/.exec(output);
      if (found) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    };
    child.stdout!.on('data', look);
    void exited.then(() => reject(new Error(`the demo exited before it listened:\n${output}`)));
  });
  return {
    url,
    child,
    output: () => output,
    kill: async (signal = 'SIGKILL') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/**
 * A checkout whose shop dies after its charge: posts `body` under `key` to `shop` (a demo with a long
 * `CHECKOUT_DELAY_MS` after its charge step), waits until `charges()` grows, then SIGKILLs the shop. Resolves once the
 * caller has seen its connection lost: the key is left PENDING under a dead owner's lease, its charge made.
 */
export async function crashAfterCharge(
  shop: DemoProcess,
  charges: () => Promise<unknown[]>,
  key: string,
  body: unknown,
): Promise<void> {
  const before = (await charges()).length;
  const first = fetch(`${shop.url}/checkouts`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  }).then(
    (response) => response.status,
    () => 'connection lost' as const, // with the process
  );
  const deadline = Date.now() + 20_000;
  while ((await charges()).length === before) {
    if (Date.now() > deadline) throw new Error(`the first shop never charged:\n${shop.output()}`);
    await sleep(25);
  }
  await shop.kill('SIGKILL');
  const answered = await first;
  if (answered !== 'connection lost') throw new Error(`the shop answered ${answered} before it was killed`);
}
