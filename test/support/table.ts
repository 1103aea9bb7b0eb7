import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { ensureIdempotencyTable } from 'nestjs-dynamodb-idempotency';

const silent = { log: () => undefined, warn: () => undefined };

export async function createIdempotencyTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await ensureIdempotencyTable(client, tableName, silent);
}

/** Every item of a table, as stored (attribute types checked through the raw `AttributeValue`s). */
export async function scanTable(client: DynamoDBClient, tableName: string) {
  const { Items = [] } = await client.send(new ScanCommand({ TableName: tableName, ConsistentRead: true }));
  return Items.map((raw) => ({ raw, item: unmarshall(raw) }));
}
