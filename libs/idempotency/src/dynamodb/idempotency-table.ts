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
import { dynamoErrorCode } from './dynamodb-errors';

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

/** The deploy-time check's verdict: `ok` only when every requirement holds. */
export interface TableCheck {
  ok: boolean;
  /** One line per requirement, prefixed `ok:` or `FAIL:`. */
  findings: string[];
}

/**
 * The runbook's deploy-time check: the table exists, its only key is `pk` (S, HASH), and TTL is ENABLED on
 * `expires_at`. Endpoints without the TTL API (dynalite always reports DISABLED) fail it, with a hint.
 */
export async function checkIdempotencyTable(
  client: DynamoDBClient | DynamoDBDocumentClient,
  tableName: string,
): Promise<TableCheck> {
  const findings: string[] = [];
  const plain = asPlainClient(client);
  let table;
  try {
    ({ Table: table } = await plain.send(new DescribeTableCommand({ TableName: tableName })));
  } catch (error) {
    return { ok: false, findings: [`FAIL: table ${tableName} cannot be described (${dynamoErrorCode(error)})`] };
  }
  const keys = (table?.KeySchema ?? []).map((k) => `${k.AttributeName}:${k.KeyType}`).join(',');
  const pkType = table?.AttributeDefinitions?.find((a) => a.AttributeName === 'pk')?.AttributeType;
  findings.push(
    keys === 'pk:HASH' && pkType === 'S'
      ? `ok: key schema is pk (S, HASH)`
      : `FAIL: key schema is ${keys || 'missing'} (pk ${pkType ?? 'undefined'}); expected only pk (S, HASH)`,
  );
  findings.push(
    table?.TableStatus === 'ACTIVE' ? 'ok: table is ACTIVE' : `FAIL: table status is ${table?.TableStatus}`,
  );
  if (table?.BillingModeSummary?.BillingMode !== 'PAY_PER_REQUEST') {
    findings.push('note: billing mode is not PAY_PER_REQUEST; under-provisioned WCU shows up as 503 store-throttled');
  }
  try {
    const { TimeToLiveDescription: ttl } = await plain.send(new DescribeTimeToLiveCommand({ TableName: tableName }));
    findings.push(
      ttl?.TimeToLiveStatus === 'ENABLED' && ttl.AttributeName === TTL_ATTRIBUTE
        ? `ok: TTL is ENABLED on ${TTL_ATTRIBUTE}`
        : `FAIL: TTL is ${ttl?.TimeToLiveStatus ?? 'unknown'}${ttl?.AttributeName ? ` on ${ttl.AttributeName}` : ''}, ` +
            `expected ENABLED on ${TTL_ATTRIBUTE} (dynalite cannot enable or report TTL: run this check against DynamoDB)`,
    );
  } catch (error) {
    findings.push(`FAIL: TTL cannot be described (${dynamoErrorCode(error)})`);
  }
  return { ok: findings.every((line) => !line.startsWith('FAIL')), findings };
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
