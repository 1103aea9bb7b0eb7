import { createHash, randomUUID } from 'node:crypto';
import {
  AttributeValue,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, ScanCommand, TransactWriteCommand, TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { Logger } from '@nestjs/common';
import { IdempotencyClock, SystemClock } from '../idempotency.clock';
import type { CommitWrite } from '../protocol/idempotency-context';
import {
  IdempotencyInFlightError,
  IdempotencyStoreThrottledError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { MAX_CLAIM_ATTEMPTS, MAX_STORED_RESPONSE_BYTES } from '../idempotency.constants';
import { IdempotencyRecord, IdempotencyStatus, isClaimable, StoredResponse } from '../repository/idempotency.record';
import { IdempotencyTelemetry, StoreOperation } from '../observability/idempotency.telemetry';
import { decodeStoredResponse, encodedByteLength, encodeStoredResponse } from '../response/stored-response.codec';
import {
  dynamoErrorCode,
  isConditionalCheckFailed,
  isReplicatedWriteConflict,
  isTransactionCanceled,
  misconfigurationFix,
  toStoreError,
} from './dynamodb-errors';
import {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  CompleteResult,
  FailInput,
  GetInput,
  IdempotencyRepository,
  refusal,
  RenewInput,
  ScanInput,
  TransitionResult,
} from '../repository/idempotency.repository';

export interface DynamoDbIdempotencyRepositoryOptions {
  client: DynamoDBClient | DynamoDBDocumentClient;
  tableName: string;
  clock?: IdempotencyClock;
  telemetry?: IdempotencyTelemetry;
}

/** The stored item, attribute by attribute (see the README's item schema). */
interface IdempotencyItem {
  pk: string;
  status: IdempotencyStatus;
  expires_at: number;
  claim_token: string;
  fingerprint: string;
  pending_since: number;
  completed_at?: number;
  response?: string | Uint8Array;
}

/** `status` is a reserved word and `response` is kept out of the way of the reserved-word list. */
const NAMES = { '#s': 'status', '#r': 'response' };
const OWNED_BY_CLAIM = '#s = :pending AND claim_token = :token';
/** DynamoDB's limit on the aggregate size of the items in one transaction. */
const MAX_TRANSACTION_BYTES = 4 * 1024 * 1024;

/**
 * The DynamoDB repository: one conditional write per state transition, first writer wins.
 * Each request is in one method below, in the order of the state machine.
 */
export class DynamoDbIdempotencyRepository extends IdempotencyRepository {
  private readonly logger = new Logger('Idempotency');
  private readonly documents: DynamoDBDocumentClient;
  private readonly tableName: string;
  private readonly clock: IdempotencyClock;
  private readonly telemetry: IdempotencyTelemetry;
  /** One request per `writes` array: a retried commit is the same request, so DynamoDB's token answers it. */
  private readonly transactions = new WeakMap<readonly CommitWrite[], { input: TransactWriteCommandInput; expiresAt: number }>();
  private transactionSupport?: Promise<boolean>;

  constructor({
    client,
    tableName,
    clock = new SystemClock(),
    telemetry = new IdempotencyTelemetry(),
  }: DynamoDbIdempotencyRepositoryOptions) {
    super();
    this.documents = client instanceof DynamoDBDocumentClient ? client : DynamoDBDocumentClient.from(client);
    this.tableName = tableName;
    this.clock = clock;
    this.telemetry = telemetry;
  }

  async claim({ key, fingerprint, leaseSeconds, clockSkewSeconds = 0 }: ClaimInput): Promise<ClaimResult> {
    for (let attempt = 1; ; attempt++) {
      const claimToken = randomUUID();
      const now = this.clock.nowSeconds();
      const item: IdempotencyItem = {
        pk: key,
        status: 'PENDING',
        expires_at: now + leaseSeconds,
        claim_token: claimToken,
        fingerprint,
        pending_since: now,
      };
      try {
        await this.send(
          'claim',
          new PutItemCommand({
            TableName: this.tableName,
            Item: attributeValues(item),
            // A lease (PENDING) only once its end is clockSkewSeconds in the past; a finished record once it expired.
            ConditionExpression:
              'attribute_not_exists(pk) OR #s = :failed OR expires_at < :leaseCutoff OR (expires_at < :now AND #s <> :pending)',
            ExpressionAttributeNames: { '#s': 'status' },
            ExpressionAttributeValues: {
              ':leaseCutoff': { N: String(now - clockSkewSeconds) },
              ':now': { N: String(now) },
              ':failed': { S: 'FAILED' },
              ':pending': { S: 'PENDING' },
            },
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        );
        return { claimed: true, claimToken };
      } catch (error) {
        // Another Region wrote the item at the same moment (multi-Region strong consistency): contention, like a
        // lost race whose winner is not known yet. Claimed again, then reported in flight, never a duplicate.
        if (isReplicatedWriteConflict(error)) {
          if (attempt >= MAX_CLAIM_ATTEMPTS) throw new IdempotencyInFlightError(1);
          continue;
        }
        if (!isConditionalCheckFailed(error)) throw error;
        this.telemetry.conditionRejected(this.tableName, 'claim');
        const existing = await this.existingAfterFailedCondition(key, error);
        // The SDK retried a claim whose first attempt timed out but landed: that attempt was ours.
        if (existing?.claimToken === claimToken) return { claimed: true, claimToken };
        const blocking = existing && !isClaimable(existing, this.clock.nowSeconds(), clockSkewSeconds);
        // Gone (TTL deleted it), expired or failed since the condition was checked: claim again, a few times.
        if (existing && (blocking || attempt >= MAX_CLAIM_ATTEMPTS)) return { claimed: false, existing };
        if (attempt >= MAX_CLAIM_ATTEMPTS) {
          throw new IdempotencyStoreUnavailableError('claim', 'ClaimContention');
        }
      }
    }
  }

  async complete({ key, claimToken, response, ttlSeconds, writes }: CompleteInput): Promise<CompleteResult> {
    const now = this.clock.nowSeconds();
    const update = {
      UpdateExpression: 'SET #s = :completed, #r = :response, expires_at = :expiresAt, completed_at = :now',
      ExpressionAttributeValues: { ':completed': 'COMPLETED', ':response': this.encodeWithinItemLimit(response), ':now': now },
    };
    if (writes?.length) return this.commit(key, claimToken, now + ttlSeconds, update, writes);
    return this.transition('complete', key, claimToken, now + ttlSeconds, update);
  }

  async fail({ key, claimToken, ttlSeconds }: FailInput): Promise<TransitionResult> {
    return this.transition('fail', key, claimToken, this.clock.nowSeconds() + ttlSeconds, {
      UpdateExpression: 'SET #s = :failed, expires_at = :expiresAt',
      ExpressionAttributeValues: { ':failed': 'FAILED' },
    });
  }

  async renew({ key, claimToken, leaseSeconds }: RenewInput): Promise<TransitionResult> {
    return this.transition('renew', key, claimToken, this.clock.nowSeconds() + leaseSeconds, {
      UpdateExpression: 'SET expires_at = :expiresAt',
      ExpressionAttributeValues: {},
    });
  }

  /**
   * Asks the endpoint once: an empty `TransactWriteItems` is a ValidationException where transactions exist
   * (DynamoDB, DynamoDB Local) and an UnknownOperationException where they do not (dynalite). A fault is not an
   * answer: the next call asks again.
   */
  override supportsCommitWith(): Promise<boolean> {
    this.transactionSupport ??= this.documents.send(new TransactWriteCommand({ TransactItems: [] })).then(
      () => true,
      (error) => {
        const code = dynamoErrorCode(error);
        if (code === 'ValidationException') return true;
        if (code === 'UnknownOperationException') return false;
        this.transactionSupport = undefined;
        throw toStoreError('commit', error);
      },
    );
    return this.transactionSupport;
  }

  /** `DescribeTable`: the table exists, these credentials may use it, and its only key is `pk` (S, HASH). */
  override async checkReady(): Promise<void> {
    let table;
    try {
      ({ Table: table } = await (this.documents as unknown as DynamoDBClient).send(new DescribeTableCommand({ TableName: this.tableName })));
    } catch (error) {
      const where = await this.where();
      throw new Error(`${describeTable(where)}: ${unusableBecause(error, where)}`);
    }
    const keys = (table?.KeySchema ?? []).map((key) => `${key.AttributeName} (${key.KeyType})`).join(', ');
    const pkType = table?.AttributeDefinitions?.find((attribute) => attribute.AttributeName === 'pk')?.AttributeType;
    if (keys !== 'pk (HASH)' || pkType !== 'S') {
      throw new Error(
        `${describeTable(await this.where())}: its key is ${keys || 'missing'}${pkType ? ` (pk of type ${pkType})` : ''}; the module needs a ` +
          'table whose only key is pk, a string hash key. Use another tableName, or create one with table:create.',
      );
    }
  }

  /** The table, the region and the endpoint (when not AWS's own) the client is configured for, for startup errors. */
  private async where(): Promise<TableLocation> {
    const config = this.documents.config;
    const region = await Promise.resolve(typeof config.region === 'function' ? config.region() : config.region).catch(() => undefined);
    const endpoint = config.endpoint ? await config.endpoint().then(formatUrl, () => undefined) : undefined;
    return { tableName: this.tableName, region, endpoint };
  }

  async get({ key }: GetInput): Promise<IdempotencyRecord | undefined> {
    const { Item } = await this.send(
      'get',
      new GetItemCommand({ TableName: this.tableName, Key: { pk: { S: key } }, ConsistentRead: true }),
    );
    return Item && recordFromAttributes(Item);
  }

  async *scan({ pageSize }: ScanInput): AsyncIterable<IdempotencyRecord[]> {
    let ExclusiveStartKey: Record<string, unknown> | undefined;
    do {
      const page = await this.send(
        'scan',
        new ScanCommand({
          TableName: this.tableName,
          Limit: pageSize,
          ExclusiveStartKey,
          // Everything but the response: the reconciler needs state, not payloads.
          ProjectionExpression: 'pk, #s, expires_at, claim_token, fingerprint, pending_since, completed_at',
          ExpressionAttributeNames: { '#s': 'status' },
        }),
      );
      yield (page.Items ?? []).map((item) => toRecord(item as unknown as IdempotencyItem));
      ExclusiveStartKey = page.LastEvaluatedKey;
    } while (ExclusiveStartKey);
  }

  /** Complete, fail and renew: an UpdateItem guarded by ownership; a failed guard is re-read and explained. */
  private async transition(
    operation: 'complete' | 'fail' | 'renew',
    key: string,
    claimToken: string,
    expiresAt: number,
    update: { UpdateExpression: string; ExpressionAttributeValues: Record<string, unknown> },
  ): Promise<TransitionResult> {
    const guarded = this.guarded(claimToken, expiresAt, update, operation === 'complete' ? NAMES : { '#s': 'status' });
    try {
      await this.send(
        operation,
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: key } },
          ...guarded,
          ExpressionAttributeValues: attributeValues(guarded.ExpressionAttributeValues),
        }),
      );
      return { ok: true, expiresAt };
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
      this.telemetry.conditionRejected(this.tableName, operation);
      return refusal(claimToken, await this.existingAfterFailedCondition(key, error));
    }
  }

  /**
   * The completion and the work's writes in one `TransactWriteItems`, its `ClientRequestToken` derived from the
   * claim token: a retry of an attempt that committed unseen (a timeout) is answered by DynamoDB, not applied again.
   * A cancellation is read reason by reason: the completion's condition → this claim lost the record; a write's own
   * condition → `commit_rejected`; conflicts and throttling → a store fault, retried by the caller.
   */
  private async commit(
    key: string,
    claimToken: string,
    expiresAt: number,
    update: { UpdateExpression: string; ExpressionAttributeValues: Record<string, unknown> },
    writes: readonly CommitWrite[],
  ): Promise<CompleteResult> {
    let request = this.transactions.get(writes);
    if (!request) {
      request = { input: this.commitInput(key, claimToken, expiresAt, update, writes), expiresAt };
      this.transactions.set(writes, request);
    }
    try {
      await this.send('commit', new TransactWriteCommand(request.input));
      return { ok: true, expiresAt: request.expiresAt };
    } catch (error) {
      const reasons: { Code?: string; Message?: string; Item?: Record<string, unknown> }[] =
        (error as { CancellationReasons?: [] }).CancellationReasons ?? [];
      const completion = reasons[writes.length];
      if (completion?.Code === 'ConditionalCheckFailed') {
        this.telemetry.conditionRejected(this.tableName, 'complete');
        return refusal(claimToken, await this.existingAfterFailedCondition(key, completion));
      }
      const writeIndex = reasons.findIndex((reason) => reason.Code === 'ConditionalCheckFailed');
      if (writeIndex >= 0) return { ok: false, reason: 'commit_rejected', writeIndex };
      const cause = reasons.findIndex((reason) => reason.Code && reason.Code !== 'None');
      const code = reasons[cause]?.Code ?? dynamoErrorCode(error);
      if (code === 'ThrottlingError' || code === 'ProvisionedThroughputExceeded') {
        throw new IdempotencyStoreThrottledError('commit', code, { cause: error });
      }
      if (code === 'TransactionConflict') throw new IdempotencyStoreUnavailableError('commit', code, { cause: error });
      if (cause >= 0) {
        const what = cause < writes.length ? `write ${cause} of commitWith` : 'the completion';
        throw new Error(`TransactWriteItems refused ${what}: ${code}: ${reasons[cause].Message ?? ''}`, { cause: error });
      }
      throw error;
    }
  }

  private commitInput(
    key: string,
    claimToken: string,
    expiresAt: number,
    update: { UpdateExpression: string; ExpressionAttributeValues: Record<string, unknown> },
    writes: readonly CommitWrite[],
  ): TransactWriteCommandInput {
    const input: TransactWriteCommandInput = {
      ClientRequestToken: createHash('sha256').update(`commit ${claimToken}`).digest('hex').slice(0, 36),
      TransactItems: [
        ...writes,
        {
          Update: {
            TableName: this.tableName,
            Key: { pk: key },
            ...this.guarded(claimToken, expiresAt, update, NAMES),
          },
        },
      ],
    };
    const bytes = approximateBytes(input.TransactItems);
    if (bytes > MAX_TRANSACTION_BYTES) {
      throw new RangeError(
        `commitWith: the transaction would be about ${bytes} bytes (the writes and the stored response), over ` +
          `DynamoDB's ${MAX_TRANSACTION_BYTES}-byte limit; nothing was written.`,
      );
    }
    return input;
  }

  /** An update that applies only while `claimToken` owns the PENDING record, and returns the record when it does not. */
  private guarded(
    claimToken: string,
    expiresAt: number,
    update: { UpdateExpression: string; ExpressionAttributeValues: Record<string, unknown> },
    names: Record<string, string>,
  ) {
    return {
      UpdateExpression: update.UpdateExpression,
      ConditionExpression: OWNED_BY_CLAIM,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: { ...update.ExpressionAttributeValues, ':expiresAt': expiresAt, ':pending': 'PENDING', ':token': claimToken },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
    };
  }

  /** Real DynamoDB returns the item on the exception (marshalled even through the DocumentClient); dynalite does not. */
  private async existingAfterFailedCondition(
    key: string,
    error: { Item?: Record<string, unknown> },
  ): Promise<IdempotencyRecord | undefined> {
    if (error.Item) return recordFromAttributes(error.Item);
    return this.get({ key });
  }

  private encodeWithinItemLimit(response: StoredResponse): string | Uint8Array {
    const encoded = encodeStoredResponse(response);
    if (encodedByteLength(encoded) <= MAX_STORED_RESPONSE_BYTES) return encoded;
    this.logger.warn(
      `Response of ${encodedByteLength(encoded)} bytes (compressed) exceeds the ${MAX_STORED_RESPONSE_BYTES}-byte limit: ` +
        'stored without its body; duplicates get 409 response-not-stored',
    );
    return encodeStoredResponse({ statusCode: response.statusCode, headers: response.headers, bodyOmitted: true });
  }

  /**
   * Every request goes through here: store faults become typed errors, failed conditions pass through. The record's
   * own reads and writes are low-level commands with their attribute values written out (`attributeValues`), so they
   * skip the DocumentClient's marshalling (in-process they take 0.86 [0.63–1.02] × the CPU of the same calls through
   * it, see bench/RESULTS.md); `scan` and `commitWith` (whose writes are the application's) still use it.
   */
  private async send(
    operation: StoreOperation,
    command: PutItemCommand | UpdateItemCommand | GetItemCommand | ScanCommand | TransactWriteCommand,
  ): Promise<{ Item?: Record<string, unknown>; Items?: Record<string, unknown>[]; LastEvaluatedKey?: Record<string, unknown> }> {
    const started = performance.now();
    let result = 'ok';
    try {
      // One call site for every command type, low-level or DocumentClient (one client, one middleware stack); the
      // output fields used are Item, Items and LastEvaluatedKey.
      return await this.documents.send(command as ScanCommand);
    } catch (error) {
      result = dynamoErrorCode(error);
      const fields = { operation, table: this.tableName, dynamo_error_code: result };
      // Answers the caller reads (a lost race, a cancelled transaction, a claim contended across Regions), not faults.
      // Contention on a completion or release is a fault like throttling: retried by the service.
      if (isConditionalCheckFailed(error) || isTransactionCanceled(error) || (operation === 'claim' && isReplicatedWriteConflict(error))) {
        this.logger.debug({ msg: 'conditional write rejected', ...fields });
        throw error;
      }
      const fix = misconfigurationFix(error);
      this.logger.error({ msg: fix ? 'idempotency store refused the call; retrying will not help' : 'idempotency store call failed', ...fields, ...(fix ? { fix } : {}) });
      throw toStoreError(operation, error);
    } finally {
      this.telemetry.storeCall(this.tableName, operation, (performance.now() - started) / 1000, result);
    }
  }
}

/**
 * A record's attributes as DynamoDB attribute values: strings (S), numbers (N) and the gzipped response (B), the
 * only types the item has.
 */
function attributeValues(values: object): Record<string, AttributeValue> {
  const marshalled: Record<string, AttributeValue> = {};
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string') marshalled[name] = { S: value };
    else if (typeof value === 'number') marshalled[name] = { N: String(value) };
    else if (value instanceof Uint8Array) marshalled[name] = { B: value };
    else throw new TypeError(`${name}: an idempotency record has no attribute of type ${typeof value}`);
  }
  return marshalled;
}

/** An item as DynamoDB returns it to a low-level command (or on a failed condition), as a record. */
function recordFromAttributes(item: Record<string, unknown>): IdempotencyRecord {
  return toRecord(unmarshall(item as Record<string, AttributeValue>) as IdempotencyItem);
}

function toRecord(item: IdempotencyItem): IdempotencyRecord {
  return {
    key: item.pk,
    status: item.status,
    expiresAt: Number(item.expires_at),
    claimToken: item.claim_token,
    fingerprint: item.fingerprint,
    pendingSince: Number(item.pending_since),
    completedAt: item.completed_at === undefined ? undefined : Number(item.completed_at),
    response: item.response === undefined ? undefined : decodeStoredResponse(item.response),
  };
}

/** The size DynamoDB counts for a value, near enough: attribute names and values, in bytes. */
function approximateBytes(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (ArrayBuffer.isView(value)) return value.byteLength;
  if (value instanceof Set) return approximateBytes([...value]);
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + 1 + approximateBytes(item), 3);
  if (value && typeof value === 'object') {
    return Object.entries(value).reduce((sum, [name, item]) => sum + Buffer.byteLength(name) + approximateBytes(item), 3);
  }
  return typeof value === 'number' ? 21 : 1;
}

interface TableLocation {
  tableName: string;
  region?: string;
  endpoint?: string;
}

/** `Idempotency table "keys" (region eu-west-1, endpoint http://localhost:4567)` */
function describeTable({ tableName, region, endpoint }: TableLocation): string {
  return `Idempotency table "${tableName}" (region ${region ?? 'unset'}${endpoint ? `, endpoint ${endpoint}` : ''})`;
}

/** Why the table cannot be used, and what fixes it, from the error `DescribeTable` got. */
function unusableBecause(error: unknown, { tableName, region, endpoint }: TableLocation): string {
  const code = dynamoErrorCode(error);
  const create =
    `npx nestjs-dynamodb-idempotency table:create --table ${tableName}` +
    `${region ? ` --region ${region}` : ''}${endpoint ? ` --endpoint ${endpoint}` : ''}`;
  switch (code) {
    case 'CredentialsProviderError':
      return 'no AWS credentials were found. Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (any non-empty values for a local endpoint such as dynalite or DynamoDB Local), use a profile or role, or pass clientConfig.credentials.';
    case 'ResourceNotFoundException':
      return `the table does not exist. Create it once: ${create}, or ensureIdempotencyTable(client, '${tableName}') before the app starts.`;
    case 'AccessDeniedException':
      return `these credentials may not call dynamodb:DescribeTable on it (${messageOf(error)}). Grant it (see IAM in the README), or set failOnStartup: false.`;
    case 'UnrecognizedClientException':
    case 'InvalidSignatureException':
      return `DynamoDB rejected the credentials (${code}). Check the access key, the secret and the region.`;
    default:
      return `DescribeTable failed with ${code} (${messageOf(error)}). Check that DynamoDB is reachable at this endpoint and region.`;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function formatUrl(url: { protocol: string; hostname: string; port?: number; path: string }): string {
  return `${url.protocol}//${url.hostname}${url.port ? `:${url.port}` : ''}${url.path === '/' ? '' : url.path}`;
}
