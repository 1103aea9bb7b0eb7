import {
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  DynamoDBClient,
  TableDescription,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { dynamoErrorCode } from './dynamodb-errors';
import { addInFlightIndexCommand, inFlightIndexState } from './in-flight-index';
import { MultiRegionMode, multiRegionMode } from './global-tables';
import { TableLayout, TableLayoutOptions } from './table-layout';

/** A table and its layout: `checkIdempotencyTable`'s and `ensureIdempotencyTable`'s second argument (or a name alone). */
export interface TableSpec extends TableLayoutOptions {
  tableName: string;
}

/** A table name, or a table with its layout, as one spec. */
export function tableSpec(table: string | TableSpec): TableSpec {
  return typeof table === 'string' ? { tableName: table } : table;
}

/** The deploy-time check's verdict: `ok` only when every requirement holds. */
export interface TableCheck {
  ok: boolean;
  /** One line per requirement, prefixed `ok:` or `FAIL:` (or `note:`). */
  findings: string[];
}

/**
 * What is wrong with a table's key for this layout, naming both keys, or undefined when it matches: the partition key
 * (S, HASH), and the sort key (S, RANGE) exactly when the layout has one. Shared by the startup check and `table:check`.
 */
export function keySchemaProblem(layout: TableLayout, table: TableDescription | undefined): string | undefined {
  const typeOf = (name: string) =>
    table?.AttributeDefinitions?.find((attribute) => attribute.AttributeName === name)?.AttributeType;
  const found = (table?.KeySchema ?? []).map(
    (key) => `${key.AttributeName} (${typeOf(key.AttributeName!) ?? '?'}, ${key.KeyType})`,
  );
  if (found.join(', ') === expectedKeys(layout)) return undefined;
  return (
    `its key is ${found.join(', ') || 'missing'}; the module is configured for ${expectedKeys(layout)}. ` +
    "Set keySchema to the table's keys (partitionKey, sortKey), use another tableName, or create one with table:create."
  );
}

/** `pk (S, HASH)`, or `PK (S, HASH), SK (S, RANGE)`. */
function expectedKeys(layout: TableLayout): string {
  return [`${layout.partitionKey} (S, HASH)`, ...(layout.sortKey ? [`${layout.sortKey} (S, RANGE)`] : [])].join(', ');
}

/**
 * The deploy-time check: the table exists, its key is the layout's, it is ACTIVE, and TTL is ENABLED on the layout's
 * expiry attribute. Endpoints without the TTL API (dynalite always reports DISABLED) fail it, with a hint.
 */
export async function checkIdempotencyTable(
  client: DynamoDBClient | DynamoDBDocumentClient,
  table: string | TableSpec,
): Promise<TableCheck> {
  const { tableName, ...layoutOptions } = tableSpec(table);
  const layout = new TableLayout(layoutOptions);
  const expiry = layout.names.expires_at;
  const plain = client as DynamoDBClient;
  const findings: string[] = [];
  let description: TableDescription | undefined;
  try {
    ({ Table: description } = await plain.send(new DescribeTableCommand({ TableName: tableName })));
  } catch (error) {
    return { ok: false, findings: [`FAIL: table ${tableName} cannot be described (${dynamoErrorCode(error)})`] };
  }
  const keyProblem = keySchemaProblem(layout, description);
  findings.push(keyProblem ? `FAIL: ${keyProblem}` : `ok: key schema is ${expectedKeys(layout)}`);
  findings.push(
    description?.TableStatus === 'ACTIVE' ? 'ok: table is ACTIVE' : `FAIL: table status is ${description?.TableStatus}`,
  );
  if (description?.BillingModeSummary?.BillingMode !== 'PAY_PER_REQUEST') {
    findings.push('note: billing mode is not PAY_PER_REQUEST; under-provisioned WCU shows up as 503 store-throttled');
  }
  findings.push(inFlightIndexFinding(tableName, layout, description));
  if (multiRegionMode(description) === 'STRONG') {
    findings.push(
      'note: a multi-Region strongly consistent (MRSC) global table: no TTL there (the reconciler deletes expired records: run it) and no commitWith (no transactions)',
    );
    return { ok: findings.every((line) => !line.startsWith('FAIL')), findings };
  }
  try {
    const { TimeToLiveDescription: ttl } = await plain.send(new DescribeTimeToLiveCommand({ TableName: tableName }));
    findings.push(
      ttl?.TimeToLiveStatus === 'ENABLED' && ttl.AttributeName === expiry
        ? `ok: TTL is ENABLED on ${expiry}`
        : `FAIL: TTL is ${ttl?.TimeToLiveStatus ?? 'unknown'}${ttl?.AttributeName ? ` on ${ttl.AttributeName}` : ''}, ` +
            `expected ENABLED on ${expiry} (dynalite cannot enable or report TTL: run this check against DynamoDB)`,
    );
  } catch (error) {
    findings.push(`FAIL: TTL cannot be described (${dynamoErrorCode(error)})`);
  }
  return { ok: findings.every((line) => !line.startsWith('FAIL')), findings };
}

/**
 * The index of keys in flight: ACTIVE (sweeps and PENDING listings read the keys in flight), or a note saying what a
 * sweep reads without it and the exact command that adds it (its attribute names following the layout). Not a
 * failure: a table without it works, its sweeps reading the whole table.
 */
function inFlightIndexFinding(
  tableName: string,
  layout: TableLayout,
  description: TableDescription | undefined,
): string {
  if (!layout.inFlightIndex) return 'note: inFlightIndex is false: sweeps and PENDING listings read the whole table';
  const state = inFlightIndexState(layout, description);
  if (state === 'ACTIVE') return `ok: the index of keys in flight ${layout.inFlightIndex} is ACTIVE`;
  if (state === 'other-keys') {
    return `FAIL: the index ${layout.inFlightIndex} is not keyed by ${layout.names.in_flight} and ${layout.names.expires_at}: name another (inFlightIndex) or delete it`;
  }
  if (state !== 'missing') return `note: the index of keys in flight ${layout.inFlightIndex} is ${state}`;
  return (
    `note: no index of keys in flight (${layout.inFlightIndex}): every sweep and PENDING listing reads the whole table ` +
    `(docs/scaling.md). Add it: ${addInFlightIndexCommand(tableName, layout, description)}`
  );
}

/**
 * The table as the module finds it at startup (`DescribeTable`): why it cannot use it (missing, these credentials may
 * not, another key), naming the table, region and endpoint and saying what fixes it; else its multi-Region mode.
 */
export async function tableReadiness(
  client: DynamoDBClient | DynamoDBDocumentClient,
  tableName: string,
  layout: TableLayout,
): Promise<{ problem?: string; mode?: MultiRegionMode }> {
  let description: TableDescription | undefined;
  try {
    ({ Table: description } = await (client as DynamoDBClient).send(
      new DescribeTableCommand({ TableName: tableName }),
    ));
  } catch (error) {
    const where = await locationOf(client, tableName);
    return { problem: `${describeTable(where)}: ${unusableBecause(error, where, layout)}` };
  }
  const problem = keySchemaProblem(layout, description);
  if (problem) return { problem: `${describeTable(await locationOf(client, tableName))}: ${problem}` };
  return { mode: multiRegionMode(description) };
}

/** Where a table is, for messages: its name, the client's region and endpoint (when not AWS's own). */
export interface TableLocation {
  tableName: string;
  region?: string;
  endpoint?: string;
}

/** The table, the region and the endpoint the client is configured for. */
export async function locationOf(
  client: DynamoDBClient | DynamoDBDocumentClient,
  tableName: string,
): Promise<TableLocation> {
  const config = client.config;
  const region = await Promise.resolve(typeof config.region === 'function' ? config.region() : config.region).catch(
    () => undefined,
  );
  const endpoint = config.endpoint ? await config.endpoint().then(formatUrl, () => undefined) : undefined;
  return { tableName, region, endpoint };
}

/** `Idempotency table "keys" (region eu-west-1, endpoint http://localhost:4567)` */
export function describeTable({ tableName, region, endpoint }: TableLocation): string {
  return `Idempotency table "${tableName}" (region ${region ?? 'unset'}${endpoint ? `, endpoint ${endpoint}` : ''})`;
}

/** Why the table cannot be used, and what fixes it, from the error `DescribeTable` got. */
export function unusableBecause(
  error: unknown,
  { tableName, region, endpoint }: TableLocation,
  layout?: TableLayout,
): string {
  const code = dynamoErrorCode(error);
  const create =
    `npx nestjs-dynamodb-idempotency table:create --table ${tableName}` +
    `${region ? ` --region ${region}` : ''}${endpoint ? ` --endpoint ${endpoint}` : ''}${layoutFlags(layout)}`;
  switch (code) {
    case 'CredentialsProviderError':
      return 'no AWS credentials were found. Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (any non-empty values for a local endpoint such as dynalite or DynamoDB Local), use a profile or role, or pass clientConfig.credentials.';
    case 'ResourceNotFoundException':
      return `the table does not exist. Create it once: ${create}, or ensureIdempotencyTable(client, '${tableName}') before the app starts.${localDatabases(endpoint, region)}`;
    case 'AccessDeniedException':
      return `these credentials may not call dynamodb:DescribeTable on it (${messageOf(error)}). Grant it (see IAM in the docs), or set failOnStartup: false.`;
    case 'UnrecognizedClientException':
    case 'InvalidSignatureException':
      return `DynamoDB rejected the credentials (${code}). Check the access key, the secret and the region.`;
    default:
      return `DescribeTable failed with ${code} (${messageOf(error)}). Check that DynamoDB is reachable at this endpoint and region.`;
  }
}

/** The flags that give `table:create` a layout other than the default (renamed attributes: its options as JSON). */
function layoutFlags(layout: TableLayout | undefined): string {
  if (!layout) return '';
  const renamed = Object.entries(layout.names).some(([name, stored]) => name !== stored);
  return [
    layout.partitionKey !== 'pk' || layout.sortKey ? ` --partition-key ${layout.partitionKey}` : '',
    layout.sortKey ? ` --sort-key ${layout.sortKey}` : '',
    layout.keyPrefix ? ` --key-prefix '${layout.keyPrefix}'` : '',
    renamed ? ' --config <the module options as JSON, for attributeNames>' : '',
  ].join('');
}

/** Whether an endpoint is on this machine (dynalite, DynamoDB Local). */
export function isLocalEndpoint(endpoint: string | undefined): boolean {
  return endpoint !== undefined && /^https?:\/\/(localhost|127\.|\[::1\])/.test(endpoint);
}

/** A local endpoint keeps one database per region and access key (DynamoDB Local): a table may be in another one. */
function localDatabases(endpoint: string | undefined, region: string | undefined): string {
  if (!isLocalEndpoint(endpoint)) return '';
  return ` A local DynamoDB (DynamoDB Local) keeps one database per region and access key: a table created with another region or access key than this client's (region ${region ?? 'unset'}) is not seen here; the CLI's default region is us-east-1.`;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function formatUrl(url: { protocol: string; hostname: string; port?: number; path: string }): string {
  return `${url.protocol}//${url.hostname}${url.port ? `:${url.port}` : ''}${url.path === '/' ? '' : url.path}`;
}
