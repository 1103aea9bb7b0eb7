import { randomUUID } from 'node:crypto';
import { AttributeValue, PutItemCommand, PutItemCommandInput } from '@aws-sdk/client-dynamodb';
import { TransactWriteCommand, TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { IdempotencyStoreUnavailableError } from '../errors/idempotency.errors';
import { MAX_CLAIM_ATTEMPTS } from '../idempotency.constants';
import type { CommitWrite } from '../repository/commit-write';
import { IdempotencyRecord, isClaimable } from '../repository/idempotency.record';
import { PutCompletedInput, PutCompletedResult, RecordLocation } from '../repository/idempotency.repository';
import { cancellationOf, commitInput } from './commit-transaction';
import { isConditionalCheckFailed } from './dynamodb-errors';
import { responseAttribute } from './item-mapping';
import { completedPutRequest } from './record-requests';
import { StoreCalls } from './store-calls';
import { TableLayout } from './table-layout';

/** What the optimistic put needs of the repository it belongs to. */
export interface CompletedPutStore {
  calls: StoreCalls;
  tableName: string;
  layout: TableLayout;
  nowSeconds(): number;
  /** Counts a put refused because another call's record is there (as a lost claim is counted). */
  refused(): void;
  /** The record a failed condition hands back (or a consistent read of it where the store hands nothing back). */
  existing(
    location: RecordLocation,
    failed: { Item?: Record<string, unknown> },
  ): Promise<IdempotencyRecord | undefined>;
}

/**
 * Optimistic mode's one DynamoDB call: a conditional `PutItem` of the COMPLETED record, or with `commitWith` writes one
 * `TransactWriteItems` of the writes and that put. A loss hands back the record there (the winner's outcome). A record
 * that vanished or became claimable between the condition and the read (TTL, a release) is put again, a few times.
 */
export async function putCompletedRecord(
  store: CompletedPutStore,
  input: PutCompletedInput,
): Promise<PutCompletedResult> {
  const { key, partition, writes = [], clockSkewSeconds = 0 } = input;
  const response = responseAttribute(input.response);
  // One token for every attempt: an attempt that landed unseen is recognised by the next one's refusal.
  const claimToken = input.claimToken ?? randomUUID();
  for (let attempt = 1; ; attempt++) {
    const nowSeconds = store.nowSeconds();
    const { fingerprint, ttlSeconds } = input;
    const put = completedPutRequest(store.tableName, store.layout, {
      key,
      partition,
      fingerprint,
      ttlSeconds,
      claimToken,
      response,
      nowSeconds,
      clockSkewSeconds,
    });
    let failed: { Item?: Record<string, unknown> };
    try {
      if (writes.length === 0) {
        await store.calls.send('claim', new PutItemCommand(put));
        return { ok: true, expiresAt: nowSeconds + input.ttlSeconds };
      }
      const transaction = transactionFor(writes, attempt, () => ({
        input: commitInput(`${claimToken} ${attempt}`, writes, documentPut(put)),
        expiresAt: nowSeconds + input.ttlSeconds,
      }));
      await store.calls.send('commit', new TransactWriteCommand(transaction.input));
      return { ok: true, expiresAt: transaction.expiresAt };
    } catch (error) {
      if (writes.length === 0) {
        if (!isConditionalCheckFailed(error)) throw error;
        failed = error as { Item?: Record<string, unknown> };
      } else {
        const cancellation = cancellationOf(error, writes.length);
        if ('writeIndex' in cancellation)
          return { ok: false, reason: 'commit_rejected', writeIndex: cancellation.writeIndex };
        failed = cancellation.completionRefused;
      }
    }
    store.refused();
    const current = await store.existing({ key, partition }, failed);
    // The SDK retried a put whose first attempt timed out but landed: that attempt was ours.
    if (current?.claimToken === claimToken) return { ok: true, expiresAt: current.expiresAt };
    if (current && !isClaimable(current, store.nowSeconds(), clockSkewSeconds)) {
      return { ok: false, reason: 'exists', current };
    }
    if (attempt >= MAX_CLAIM_ATTEMPTS) throw new IdempotencyStoreUnavailableError('claim', 'ClaimContention');
  }
}

/**
 * A first attempt's transaction, kept per `writes` array: a retry after a store fault (the caller retries with the same
 * array) sends it again unchanged, so that DynamoDB answers a transaction that committed unseen by its
 * `ClientRequestToken` instead of refusing a changed request under the same token.
 */
const firstTransactions = new WeakMap<
  readonly CommitWrite[],
  { input: TransactWriteCommandInput; expiresAt: number }
>();

function transactionFor(
  writes: readonly CommitWrite[],
  attempt: number,
  make: () => { input: TransactWriteCommandInput; expiresAt: number },
) {
  if (attempt > 1) return make();
  let transaction = firstTransactions.get(writes);
  if (!transaction) firstTransactions.set(writes, (transaction = make()));
  return transaction;
}

/** The put as a transaction action, in the DocumentClient's form (plain values). */
function documentPut(put: PutItemCommandInput) {
  const plain = (values: Record<string, AttributeValue> | undefined) => values && unmarshall(values);
  return {
    Put: {
      TableName: put.TableName,
      Item: plain(put.Item)!,
      ConditionExpression: put.ConditionExpression,
      ExpressionAttributeNames: put.ExpressionAttributeNames,
      ExpressionAttributeValues: plain(put.ExpressionAttributeValues),
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
    },
  };
}
