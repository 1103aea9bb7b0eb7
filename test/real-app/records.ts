import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { decodeStoredResponse } from '../../libs/idempotency/src/response/stored-response.codec';

/** The item of a route's key as DynamoDB holds it, its response decoded; undefined while there is none. */
export async function readRecord(
  client: DynamoDBClient,
  tableName: string,
  route: string,
  key: string,
  scope?: string,
) {
  const { Item } = await client.send(
    new GetItemCommand({
      TableName: tableName,
      Key: { pk: { S: recordKey(route, scope, key) } },
      ConsistentRead: true,
    }),
  );
  if (!Item) return undefined;
  const item = unmarshall(Item) as Record<string, any>;
  return { ...item, response: item.response === undefined ? undefined : decodeStoredResponse(item.response) } as {
    status: string;
    response?: ReturnType<typeof decodeStoredResponse>;
    [attribute: string]: unknown;
  };
}

/** Waits until the record of a key has `status` (the owner wrote its outcome), at most `timeoutMs`. */
export async function untilStatus(
  client: DynamoDBClient,
  tableName: string,
  route: string,
  key: string,
  status: string,
  timeoutMs = 10_000,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const record = await readRecord(client, tableName, route, key);
    if (record?.status === status) return record;
    if (Date.now() > deadline)
      throw new Error(`${route} ${key}: still ${record?.status ?? 'absent'} after ${timeoutMs} ms`);
    await sleep(20);
  }
}
