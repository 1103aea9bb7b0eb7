import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { ensureIdempotencyTable, ensureTable, TableLayoutOptions } from 'nestjs-dynamodb-idempotency';
import { asDefaultLayout } from './layouts';

const silent = { log: () => undefined, warn: () => undefined };

export async function createIdempotencyTable(
  client: DynamoDBClient,
  tableName: string,
  layout: TableLayoutOptions = {},
): Promise<void> {
  await ensureIdempotencyTable(client, { tableName, ...layout }, silent);
}

/**
 * A table whose only key is one string attribute (`id` by default), pay per request, without TTL: the orders tables of
 * the suites and the bench, or an idempotency table a test wants without TTL deletion.
 */
export async function createTableWithKey(client: DynamoDBClient, tableName: string, key = 'id'): Promise<void> {
  await ensureTable(
    client,
    {
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: key, AttributeType: 'S' }],
      KeySchema: [{ AttributeName: key, KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    },
    silent,
  );
}

/**
 * Every record of a table, as stored (attribute types checked through the raw `AttributeValue`s), named as the default
 * layout names them whatever the table's layout (`asDefaultLayout`); other items of a shared table are left out.
 */
export async function scanTable(client: DynamoDBClient, tableName: string, layout: TableLayoutOptions = {}) {
  const { Items = [] } = await client.send(new ScanCommand({ TableName: tableName, ConsistentRead: true }));
  return Items.flatMap((stored) => {
    const raw = asDefaultLayout(stored, layout);
    return raw ? [{ raw, item: unmarshall(raw) }] : [];
  });
}

/**
 * An item of the app's own in a table it shares with the module, whose attributes are named like a record's: a
 * "PENDING" order, long expired. Listings, sweeps and operators' commands must never touch it.
 */
export function appItemLikeARecord(PK: string, SK: string) {
  return {
    PK: { S: PK },
    SK: { S: SK },
    status: { S: 'PENDING' },
    claim_token: { S: 'payment-1' },
    expires_at: { N: '1' },
    pending_since: { N: '1' },
    fingerprint: { S: 'f' },
  };
}
