import {
  AttributeDefinition,
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  DynamoDBClient,
  KeySchemaElement,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Logger } from '@nestjs/common';
import { dynamoErrorCode } from './dynamodb-errors';
import { inFlightIndexDefinition } from './in-flight-index';
import { TableSpec, tableSpec } from './table-checks';
import { TableLayout } from './table-layout';

/** The table's TTL attribute in the default layout (`attributeNames.expires_at` renames it). */
export const TTL_ATTRIBUTE = 'expires_at';

/**
 * Creates the idempotency table if it is missing (its layout's keys, strings; on-demand billing; the index of keys in
 * flight, unless the layout's `inFlightIndex` is false) and enables TTL on the expiry attribute: a deployment's first
 * step. Safe to call from several instances at once. An existing table is left as it is (`table:check` says what it
 * lacks, and prints the command that adds the index). Endpoints without the TTL API (dynalite) get a warning, not a
 * failure: expiry is enforced in code anyway.
 *
 * `table` is a name (the default layout: `pk` alone) or `{ tableName, keySchema, attributeNames, inFlightIndex }`.
 */
export async function ensureIdempotencyTable(
  client: DynamoDBClient | DynamoDBDocumentClient,
  table: string | TableSpec,
  logger: Pick<Logger, 'log' | 'warn'> = new Logger('Idempotency'),
): Promise<void> {
  const { tableName, ...layoutOptions } = tableSpec(table);
  const layout = new TableLayout(layoutOptions);
  const keys: KeySchemaElement[] = [{ AttributeName: layout.partitionKey, KeyType: 'HASH' }];
  if (layout.sortKey) keys.push({ AttributeName: layout.sortKey, KeyType: 'RANGE' });
  const definitions: AttributeDefinition[] = keys.map(({ AttributeName }) => ({ AttributeName, AttributeType: 'S' }));
  const inFlight = layout.inFlightIndex ? inFlightIndexDefinition(layout) : undefined;
  await ensureTable(
    client,
    {
      TableName: tableName,
      AttributeDefinitions: [...definitions, ...(inFlight?.attributes ?? [])],
      KeySchema: keys,
      BillingMode: 'PAY_PER_REQUEST',
      ...(inFlight ? { GlobalSecondaryIndexes: [inFlight.index] } : {}),
    },
    logger,
  );
  const expiry = layout.names.expires_at;
  try {
    const { TimeToLiveDescription } = await asPlainClient(client).send(
      new DescribeTimeToLiveCommand({ TableName: tableName }),
    );
    const status = TimeToLiveDescription?.TimeToLiveStatus;
    if ((status === 'ENABLED' || status === 'ENABLING') && TimeToLiveDescription?.AttributeName === expiry) return;
    await asPlainClient(client).send(
      new UpdateTimeToLiveCommand({
        TableName: tableName,
        TimeToLiveSpecification: { Enabled: true, AttributeName: expiry },
      }),
    );
    logger.log(`TTL enabled on ${tableName}.${expiry}`);
  } catch (error) {
    logger.warn(
      `Could not enable TTL on ${tableName}.${expiry} (${dynamoErrorCode(error)}). ` +
        'Expired records are still ignored by the module, but nothing deletes them (expected on dynalite).',
    );
  }
}

/** Creates a table unless it exists, and waits until it is ACTIVE. Exported for the demo's own tables. */
export async function ensureTable(
  client: DynamoDBClient | DynamoDBDocumentClient,
  definition: ConstructorParameters<typeof CreateTableCommand>[0] & { TableName: string },
  logger: Pick<Logger, 'log'> = new Logger('Idempotency'),
): Promise<void> {
  try {
    await asPlainClient(client).send(new DescribeTableCommand({ TableName: definition.TableName }));
    return;
  } catch (error) {
    if (dynamoErrorCode(error) !== 'ResourceNotFoundException') throw error;
  }
  try {
    await asPlainClient(client).send(new CreateTableCommand(definition));
    logger.log(`Created table ${definition.TableName}`);
  } catch (error) {
    // Another instance created it first.
    if (dynamoErrorCode(error) !== 'ResourceInUseException') throw error;
  }
  await waitUntilTableExists(
    { client: asPlainClient(client), maxWaitTime: 60, minDelay: 1 },
    { TableName: definition.TableName },
  );
}

/** A document client sends table-level commands unchanged; only the types differ. */
function asPlainClient(client: DynamoDBClient | DynamoDBDocumentClient): DynamoDBClient {
  return client as DynamoDBClient;
}
