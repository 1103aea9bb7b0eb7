import { createHash } from 'node:crypto';
import { DynamoDBDocumentClient, TransactWriteCommand, TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { IdempotencyStoreThrottledError, IdempotencyStoreUnavailableError } from '../errors/idempotency.errors';
import type { CommitWrite } from '../repository/commit-write';
import { IdempotencyRecord } from '../repository/idempotency.record';
import { CompleteResult, RecordLocation, refusal } from '../repository/idempotency.repository';
import { dynamoErrorCode, toStoreError } from './dynamodb-errors';
import { guarded, Transition } from './record-requests';
import { StoreCalls } from './store-calls';
import { TableLayout } from './table-layout';

/** DynamoDB's limit on the aggregate size of the items in one transaction. */
const MAX_TRANSACTION_BYTES = 4 * 1024 * 1024;

type TransactItem = NonNullable<TransactWriteCommandInput['TransactItems']>[number];
/** The completion as one action of a transaction, in the DocumentClient's form. */
export type CompletionUpdate = NonNullable<TransactItem['Update']>;
/** The record's own action in a transaction: the completion (lease mode) or the COMPLETED record's put (optimistic). */
export type CompletionAction = { Update: CompletionUpdate } | { Put: NonNullable<TransactItem['Put']> };

/**
 * The work's writes and the completion (last) in one `TransactWriteItems`, its `ClientRequestToken` derived from the claim
 * token: a retry of an attempt that committed unseen (a timeout) is answered by DynamoDB, not applied again. Refused
 * before anything is sent when it would exceed DynamoDB's 4 MB.
 */
export function commitInput(
  claimToken: string,
  writes: readonly CommitWrite[],
  completion: CompletionAction,
  /** Names a second request of the same claim (the completion without its body): its token differs. */
  variant = '',
): TransactWriteCommandInput {
  const token = `commit ${claimToken}${variant ? ` ${variant}` : ''}`;
  const input: TransactWriteCommandInput = {
    ClientRequestToken: createHash('sha256').update(token).digest('hex').slice(0, 36),
    TransactItems: [...writes, completion],
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

/** Why a commit was cancelled, where it is an answer: the completion's guard, or one of the work's own conditions. */
export type Cancellation = { completionRefused: { Item?: Record<string, unknown> } } | { writeIndex: number };

/**
 * A cancelled transaction read reason by reason: the completion's condition → this claim lost the record; a write's
 * own condition → that write; conflicts and throttling → a store fault (thrown, retried by the caller); any other
 * reason → an error naming the action.
 */
export function cancellationOf(error: unknown, writeCount: number): Cancellation {
  const reasons: { Code?: string; Message?: string; Item?: Record<string, unknown> }[] =
    (error as { CancellationReasons?: [] }).CancellationReasons ?? [];
  const completion = reasons[writeCount];
  if (completion?.Code === 'ConditionalCheckFailed') return { completionRefused: completion };
  const writeIndex = reasons.findIndex((reason) => reason.Code === 'ConditionalCheckFailed');
  if (writeIndex >= 0) return { writeIndex };
  const cause = reasons.findIndex((reason) => reason.Code && reason.Code !== 'None');
  const code = reasons[cause]?.Code ?? dynamoErrorCode(error);
  if (code === 'ThrottlingError' || code === 'ProvisionedThroughputExceeded') {
    throw new IdempotencyStoreThrottledError('commit', code, { cause: error });
  }
  if (code === 'TransactionConflict') throw new IdempotencyStoreUnavailableError('commit', code, { cause: error });
  if (cause === writeCount && code === 'ValidationError' && /item size/i.test(reasons[cause].Message ?? '')) {
    // The completion over DynamoDB's 400 KB: an item-size refusal, so that it is written again without its body.
    throw Object.assign(new Error(reasons[cause].Message), { name: 'ValidationException', cause: error });
  }
  if (cause >= 0) {
    const what = cause < writeCount ? `write ${cause} of commitWith` : 'the completion';
    throw new Error(`TransactWriteItems refused ${what}: ${code}: ${reasons[cause].Message ?? ''}`, { cause: error });
  }
  throw error;
}

/**
 * Whether the endpoint has transactions: an empty `TransactWriteItems` is a ValidationException where they exist
 * (DynamoDB, DynamoDB Local) and an UnknownOperationException where they do not (dynalite); a fault is thrown.
 */
export function supportsTransactions(documents: DynamoDBDocumentClient): Promise<boolean> {
  return documents.send(new TransactWriteCommand({ TransactItems: [] })).then(
    () => true,
    (error) => {
      const code = dynamoErrorCode(error);
      if (code === 'ValidationException') return true;
      if (code === 'UnknownOperationException') return false;
      throw toStoreError('commit', error);
    },
  );
}

/** The size DynamoDB counts for a value, near enough: attribute names and values, in bytes. */
function approximateBytes(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (ArrayBuffer.isView(value)) return value.byteLength;
  if (value instanceof Set) return approximateBytes([...value]);
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + 1 + approximateBytes(item), 3);
  if (value && typeof value === 'object') {
    return Object.entries(value).reduce(
      (sum, [name, item]) => sum + Buffer.byteLength(name) + approximateBytes(item),
      3,
    );
  }
  return typeof value === 'number' ? 21 : 1;
}

/** Whether two stored responses (JSON text, or gzipped bytes made anew on each call) hold the same bytes. */
export function sameBytes(a: unknown, b: unknown): boolean {
  return a instanceof Uint8Array && b instanceof Uint8Array ? Buffer.from(a).equals(Buffer.from(b)) : a === b;
}

/** What a commit needs of the repository: its calls and layout, and how a refusal is counted and explained. */
export interface CommitStore {
  calls: StoreCalls;
  tableName: string;
  layout: TableLayout;
  /** Counts a completion the guard refused. */
  refused(): void;
  /** The record as it is now, after a refused guard (from the cancellation, or read). */
  existing(
    location: RecordLocation,
    failed: { Item?: Record<string, unknown> },
  ): Promise<IdempotencyRecord | undefined>;
}

/**
 * The completions that carry the work's writes: the writes and the guarded completion in one transaction (see
 * `commitInput`), a cancellation read by `cancellationOf`. One request per `writes` array: a retried commit is the
 * same request, so DynamoDB's token answers it.
 */
export class CompletionCommits {
  private readonly requests = new WeakMap<
    readonly CommitWrite[],
    { input: TransactWriteCommandInput; expiresAt: number; response: unknown }
  >();

  constructor(private readonly store: CommitStore) {}

  async commit(
    location: RecordLocation,
    claimToken: string,
    expiresAt: number,
    transition: Transition,
    writes: readonly CommitWrite[],
  ): Promise<CompleteResult> {
    const { calls, tableName, layout } = this.store;
    let request = this.requests.get(writes);
    const response = transition.ExpressionAttributeValues[':response'];
    // The completion written again without its body (`writeCompletion`) is another request, with a token of its own.
    if (!request || !sameBytes(request.response, response)) {
      const completion: CompletionUpdate = {
        TableName: tableName,
        Key: layout.documentKey(location.key, location.partition),
        ...guarded(layout, claimToken, expiresAt, transition),
      };
      const input = commitInput(claimToken, writes, { Update: completion }, request ? 'without its body' : '');
      request = { input, expiresAt, response };
      this.requests.set(writes, request);
    }
    try {
      await calls.send('commit', new TransactWriteCommand(request.input));
      return { ok: true, expiresAt: request.expiresAt };
    } catch (error) {
      const cancellation = cancellationOf(error, writes.length);
      if ('writeIndex' in cancellation)
        return { ok: false, reason: 'commit_rejected', writeIndex: cancellation.writeIndex };
      this.store.refused();
      return refusal(claimToken, await this.store.existing(location, cancellation.completionRefused));
    }
  }
}
