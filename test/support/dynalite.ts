import { randomBytes } from 'node:crypto';
import { AddressInfo } from 'node:net';
import { DynamoDBClient, DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { ConfiguredRetryStrategy } from '@smithy/core/retry';
// dynalite ships no types.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const dynalite = require('dynalite') as (options: { createTableMs: number }) => import('node:http').Server;

/** An in-process DynamoDB API (dynalite) on a free loopback port. */
export interface Dynalite {
  endpoint: string;
  stop(): Promise<void>;
}

export async function startDynalite(onPort = 0): Promise<Dynalite> {
  const server = dynalite({ createTableMs: 0 });
  await new Promise<void>((resolve) => server.listen(onPort, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A client for a local endpoint: dummy credentials, and retries with a 1 ms backoff so fault tests stay fast. */
export function localClient(endpoint: string, config: DynamoDBClientConfig = {}): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    retryStrategy: new ConfiguredRetryStrategy(3, 1),
    ...config,
  });
}

/**
 * A table name no other test uses. Random, not a counter: each test file has its own module registry (a counter
 * would start again at 1 in the next file of the same worker), and DynamoDB Local is shared by the whole run.
 */
export function uniqueTableName(prefix = 'idempotency'): string {
  return `${prefix}_${process.pid}_${randomBytes(6).toString('hex')}`;
}
