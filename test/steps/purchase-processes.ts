import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DemoProcess } from '../support/demo-process';
import { localClient, uniqueTableName } from '../support/dynalite';
import { createTableWithKey } from '../support/table';

/**
 * What the step suites across processes share: the demo's payment provider's lists, waiting for a process to say
 * something, the execute() worker (purchase-worker.script.ts) and the reconciler's CLI, each in a process of its own.
 */
const ROOT = join(__dirname, '..', '..');

export interface Charge {
  chargeId: string;
  chargedAt: string;
  key: string;
}
export interface Receipt {
  receiptId: string;
  chargeId: string;
  key: string;
}
/** A purchase's answer: the demo's `POST /purchases` body, or the worker's result (its `chargedAt` as ISO text). */
export interface Purchase {
  chargeId: string;
  chargedAt: string;
  chargedBy: number;
  receiptId: string;
  ranHere: string[];
}

/**
 * The demo's tables (its env), made here without TTL and used as they are (`CREATE_TABLES=0`): DynamoDB Local's TTL
 * sweeper, about every 10 s, deletes a PENDING record once its lease has ended, and with it the steps a dead owner
 * recorded, which would race the retry these suites make (docs/recovery-points.md: what TTL does to steps).
 */
export async function tablesWithoutTtl(endpoint: string): Promise<Record<string, string>> {
  const tables = { IDEMPOTENCY_TABLE: uniqueTableName('steps'), ORDERS_TABLE: uniqueTableName('orders') };
  const client = localClient(endpoint);
  await createTableWithKey(client, tables.IDEMPOTENCY_TABLE, 'pk');
  await createTableWithKey(client, tables.ORDERS_TABLE);
  client.destroy();
  return { ...tables, CREATE_TABLES: '0' };
}

/** The provider's charges and receipts made since this was called. */
export async function providerSince(provider: DemoProcess) {
  const list = async <T>(path: string) => (await (await fetch(`${provider.url}${path}`)).json()) as T[];
  const [charges, receipts] = [
    (await list<Charge>('/payments/charges')).length,
    (await list<Receipt>('/payments/receipts')).length,
  ];
  return async () => ({
    charges: (await list<Charge>('/payments/charges')).slice(charges),
    receipts: (await list<Receipt>('/payments/receipts')).slice(receipts),
  });
}

/** Waits until the process has printed `text`. */
export async function printed(demo: { output(): string }, text: string, timeoutMs = 20_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !demo.output().includes(text); await sleep(20)) {
    if (Date.now() > deadline) throw new Error(`the process never printed "${text}":\n${demo.output()}`);
  }
}

/** A job's answer from the worker: its result, its error as `Name: message`, or the connection lost with the process. */
export type WorkerAnswer = { value: Record<string, unknown> } | { error: string } | 'connection lost';

/** An execute() worker (purchase-worker.script.ts): buys over IPC; `PURCHASE_FAULT` as its env says. */
export interface PurchaseWorker {
  child: ChildProcess;
  buy(key: string): Promise<WorkerAnswer>;
  output(): string;
  kill(): Promise<void>;
}

export async function startWorker(env: Record<string, string>): Promise<PurchaseWorker> {
  const child = fork(join(ROOT, 'test/support/run-ts.cjs'), [join(__dirname, 'purchase-worker.script.ts')], {
    cwd: ROOT,
    env: { ...process.env, AWS_EC2_METADATA_DISABLED: 'true', NODE_NO_WARNINGS: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'advanced',
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const answers = new Map<number, (answer: WorkerAnswer) => void>();
  child.on('message', (message: { id?: number; paused?: string }) => {
    if (message.paused) output += `purchase paused ${message.paused}\n`;
    if (message.id !== undefined) answers.get(message.id)?.(message as WorkerAnswer);
  });
  void exited.then(() => answers.forEach((answer) => answer('connection lost')));
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    void exited.then(() => reject(new Error(`the worker exited before it was ready:\n${output}`)));
  });
  let jobs = 0;
  return {
    child,
    buy: (key) =>
      new Promise((resolve) => {
        const id = ++jobs;
        answers.set(id, resolve);
        child.send({ id, key });
      }),
    output: () => output,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** One sweep by the module's CLI (`reconcile --json`), in a process of its own: what it printed, parsed. */
export async function reconcileOnce(endpoint: string, tableName: string): Promise<Record<string, number>> {
  const args = ['reconcile', '--table', tableName, '--endpoint', endpoint, '--json'];
  const child = fork(join(ROOT, 'test/support/run-ts.cjs'), [join(ROOT, 'libs/idempotency/src/cli/main.ts'), ...args], {
    cwd: ROOT,
    env: { ...process.env, AWS_EC2_METADATA_DISABLED: 'true', NODE_NO_WARNINGS: '1' },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let [stdout, stderr] = ['', ''];
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`reconcile exited ${code}:\n${stdout}${stderr}`);
  return JSON.parse(stdout) as Record<string, number>;
}
