import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { localClient } from '../support/dynalite';

/** Real processes: dynalite and the demo app, started the way an operator would (node + environment). */
const ROOT = join(__dirname, '..', '..');

/** A child process with its output kept, for error messages. */
export class Proc {
  output = '';
  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    child.stdout?.on('data', (chunk) => (this.output += chunk));
    child.stderr?.on('data', (chunk) => (this.output += chunk));
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends a signal without waiting for an exit (SIGSTOP pauses the process, SIGCONT resumes it). */
  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  async kill(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    if (signal !== 'SIGKILL') this.child.kill('SIGCONT'); // a paused process acts on other signals only once resumed
    if (!this.alive) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill(signal);
    await exited;
  }
}

function start(name: string, args: string[], env: Record<string, string> = {}): Proc {
  return new Proc(
    name,
    spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }),
  );
}

async function until(what: string, proc: Proc, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!proc.alive) throw new Error(`${proc.name} exited while waiting for ${what}:\n${proc.output}`);
    if (await check().catch(() => false)) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}:\n${proc.output}`);
}

/** Waits until the process prints a line matching `pattern`; returns the first capture group. */
async function printed(what: string, proc: Proc, pattern: RegExp): Promise<string> {
  let found: string | undefined;
  await until(what, proc, async () => (found = pattern.exec(proc.output)?.[1]) !== undefined);
  return found!;
}

export interface StoreProc extends Proc {
  endpoint: string;
}

/**
 * dynalite as its own process, on the port the system gives it (reported by the process, never guessed
 * beforehand), or on `port` to restart a store where its clients expect it; with `path`, on disk.
 */
export async function startDynaliteProcess({
  port = 0,
  path,
}: { port?: number; path?: string } = {}): Promise<StoreProc> {
  const script =
    "const server = require('dynalite')({ createTableMs: 0, path: process.env.DYNALITE_PATH || undefined });" +
    "server.listen(Number(process.env.DYNALITE_PORT), '127.0.0.1', () => console.log('dynalite on port ' + server.address().port));";
  const proc = start('dynalite', ['-e', script], {
    DYNALITE_PORT: String(port),
    DYNALITE_PATH: path ?? '',
  }) as StoreProc;
  proc.endpoint = `http://127.0.0.1:${await printed('dynalite', proc, /dynalite on port (\d+)/)}`;
  return proc;
}

export interface AppProc extends Proc {
  url: string;
}

/** One demo instance (`node dist/apps/orders-api/main.js`, built by `npm run build`), on ports the system picks. */
export async function startDemo(endpoint: string, env: Record<string, string> = {}): Promise<AppProc> {
  const proc = start('orders-api', ['dist/apps/orders-api/main.js'], {
    PORT: '0',
    MICROSERVICE_PORT: '0',
    DYNAMODB_ENDPOINT: endpoint,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    ...env,
  }) as AppProc;
  proc.url = await printed(proc.name, proc, /Orders API listening on (http:\/\/[\w.:[\]-]+)/);
  await until(proc.name, proc, async () => (await fetch(`${proc.url}/health`)).status === 200);
  return proc;
}

export interface Answer {
  status: number;
  text: string;
  replayed: boolean;
}

export interface Resolution {
  /** The last answer: a final one unless the deadline passed. */
  final: Answer;
  /** Every status seen on the way, in order. */
  statuses: number[];
}

/**
 * A well-behaved client: POSTs an order with a key and retries 409 and 503 (waiting a little, not the full
 * Retry-After, to keep the suite fast) until it gets a final answer or the deadline passes.
 */
export async function placeOrder(
  urls: string | (() => string),
  key: string,
  body: unknown,
  deadlineMs = 45_000,
): Promise<Resolution> {
  const statuses: number[] = [];
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const url = typeof urls === 'string' ? urls : urls();
    let answer: Answer;
    try {
      const response = await fetch(`${url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(body),
      });
      answer = {
        status: response.status,
        text: await response.text(),
        replayed: response.headers.get('idempotent-replayed') === 'true',
      };
    } catch {
      answer = { status: 0, text: 'connection failed', replayed: false }; // the instance is down: try again
    }
    statuses.push(answer.status);
    if (![0, 409, 503].includes(answer.status) || Date.now() > deadline) return { final: answer, statuses };
    await sleep(100 + Math.random() * 150);
  }
}

/** The `orders` table, read directly. */
export async function ordersIn(endpoint: string, table = 'orders'): Promise<Array<{ id: string; item: string }>> {
  const client: DynamoDBClient = localClient(endpoint);
  const items: Array<{ id: string; item: string }> = [];
  let ExclusiveStartKey: Record<string, never> | undefined;
  do {
    const page = await client.send(new ScanCommand({ TableName: table, ExclusiveStartKey, ConsistentRead: true }));
    items.push(...(page.Items ?? []).map((item) => unmarshall(item) as { id: string; item: string }));
    ExclusiveStartKey = page.LastEvaluatedKey as Record<string, never> | undefined;
  } while (ExclusiveStartKey);
  client.destroy();
  return items;
}

/** Counts by value: `{ 201: 30, 409: 12 }`. */
export function tally(values: Array<number | string>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

/** One line per scenario in test/reliability/RESULTS.md material: printed, and kept for the summary test. */
export const findings: string[] = [];
export function record(line: string): void {
  findings.push(line);
  console.log(`[reliability] ${line}`);
}
