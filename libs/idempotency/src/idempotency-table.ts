import {
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  DynamoDBClient,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Logger } from '@nestjs/common';
import { dynamoErrorCode } from './repository/dynamodb-errors';

/** The table's TTL attribute. */
export const TTL_ATTRIBUTE = 'expires_at';

/**
 * Creates the idempotency table if it is missing (`pk` string hash key, on-demand billing) and enables TTL on
 * `expires_at`, as the runbook's step 1 does. Safe to call from several instances at once.
 * Endpoints without the TTL API (dynalite) get a warning, not a failure: expiry is enforced in code anyway.
 */
export async function ensureIdempotencyTable(
  client: DynamoDBClient | DynamoDBDocumentClient,
  tableName: string,
  logger: Pick<Logger, 'log' | 'warn'> = new Logger('Idempotency'),
): Promise<void> {
  await ensureTable(client, {
    TableName: tableName,
    AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  }, logger);
  try {
    const { TimeToLiveDescription } = await asPlainClient(client).send(new DescribeTimeToLiveCommand({ TableName: tableName }));
    const status = TimeToLiveDescription?.TimeToLiveStatus;
    if ((status === 'ENABLED' || status === 'ENABLING') && TimeToLiveDescription?.AttributeName === TTL_ATTRIBUTE) return;
    await asPlainClient(client).send(
      new UpdateTimeToLiveCommand({
        TableName: tableName,
        TimeToLiveSpecification: { Enabled: true, AttributeName: TTL_ATTRIBUTE },
      }),
    );
    logger.log(`TTL enabled on ${tableName}.${TTL_ATTRIBUTE}`);
  } catch (error) {
    logger.warn(
      `Could not enable TTL on ${tableName}.${TTL_ATTRIBUTE} (${dynamoErrorCode(error)}). ` +
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
  await waitUntilTableExists({ client: asPlainClient(client), maxWaitTime: 60, minDelay: 1 }, { TableName: definition.TableName });
}

/** A document client sends table-level commands unchanged; only the types differ. */
function asPlainClient(client: DynamoDBClient | DynamoDBDocumentClient): DynamoDBClient {
  return client as DynamoDBClient;
}
