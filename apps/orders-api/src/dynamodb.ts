import { AddressInfo } from 'node:net';
import { Server } from 'node:http';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { OrdersApiConfig } from './config';

/** The DynamoDB endpoint the demo talks to, and how to let go of it. */
export interface DynamoEndpoint {
  endpoint?: string;
  embedded: boolean;
  close(): Promise<void>;
}

/** Without DYNAMODB_ENDPOINT, start dynalite (an in-memory DynamoDB API) inside this process. */
export async function resolveEndpoint(config: OrdersApiConfig): Promise<DynamoEndpoint> {
  if (config.dynamoEndpoint) return { endpoint: config.dynamoEndpoint, embedded: false, close: async () => undefined };
  // dynalite ships no types.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const dynalite = require('dynalite') as (options: { createTableMs: number }) => Server;
  const server = dynalite({ createTableMs: 0 });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    embedded: true,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Local endpoints (dynalite) accept any credentials; real DynamoDB uses the SDK's default chain. */
export function createDynamoClient(config: OrdersApiConfig, endpoint?: string): DynamoDBClient {
  const local = endpoint !== undefined && /^https?:\/\/(localhost|127\.|\[::1\])/.test(endpoint);
  const needsDummyCredentials = local && !process.env.AWS_ACCESS_KEY_ID;
  return new DynamoDBClient({
    region: config.region,
    endpoint,
    ...(needsDummyCredentials ? { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } } : {}),
  });
}
