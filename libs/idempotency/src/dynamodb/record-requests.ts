import {
  GetItemCommandInput,
  QueryCommandInput,
  PutItemCommandInput,
  ScanCommandInput,
  UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { RecordLocation } from '../repository/idempotency.repository';
import { attributeValues, names, RecordItem, recordItem } from './item-mapping';
import { TableLayout } from './table-layout';

/**
 * Each request of the state machine, as DynamoDB receives it: the claim, the guarded transitions (complete, fail,
 * renew), the read and the scan. Every attribute is named through a placeholder (see `names`).
 */

/**
 * A claim wins a new key, a failed attempt (not a final failure: one with a response), a lease past its end by the
 * clock-skew margin, or a finished record (a final failure included) past its expiry.
 */
export const CLAIMABLE =
  'attribute_not_exists(#pk) OR (#status = :failed AND attribute_not_exists(#response)) OR #expires < :leaseCutoff OR (#expires < :now AND #status <> :pending)';
/** Every transition after the claim applies only while this claim owns the PENDING record. */
export const OWNED_BY_CLAIM = '#status = :pending AND #token = :token';
/** Everything but the response: listings need state, not payloads. */
const STATE = '#pk, #status, #expires, #token, #fingerprint, #pending, #completed, #holder, #renewed';

export interface CompletedPutRequest extends RecordLocation {
  claimToken: string;
  fingerprint: string;
  response: string | Uint8Array;
  nowSeconds: number;
  ttlSeconds: number;
  clockSkewSeconds: number;
}

/**
 * Optimistic mode's one write: the COMPLETED record put where a claim would win, first writer wins; the old item (the
 * winner's, with its response) comes back on a loss.
 */
export function completedPutRequest(
  tableName: string,
  layout: TableLayout,
  put: CompletedPutRequest,
): PutItemCommandInput {
  const { key, partition, claimToken, fingerprint, response, nowSeconds, ttlSeconds, clockSkewSeconds } = put;
  const item: RecordItem = {
    status: 'COMPLETED',
    expires_at: nowSeconds + ttlSeconds,
    claim_token: claimToken,
    fingerprint,
    pending_since: nowSeconds,
    completed_at: nowSeconds,
    response,
  };
  return claimablePut(tableName, layout, { key, partition }, item, nowSeconds, clockSkewSeconds);
}

/** A record put under the claim's condition (`CLAIMABLE`). */
function claimablePut(
  tableName: string,
  layout: TableLayout,
  { key, partition }: RecordLocation,
  item: RecordItem,
  nowSeconds: number,
  clockSkewSeconds: number,
): PutItemCommandInput {
  return {
    TableName: tableName,
    Item: recordItem(layout, key, partition, item),
    ConditionExpression: CLAIMABLE,
    ExpressionAttributeNames: names(layout, CLAIMABLE),
    ExpressionAttributeValues: attributeValues({
      ':leaseCutoff': nowSeconds - clockSkewSeconds,
      ':now': nowSeconds,
      ':failed': 'FAILED',
      ':pending': 'PENDING',
    }),
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}

/** What a transition sets, besides the new `expires_at`. */
export interface Transition {
  UpdateExpression: string;
  ExpressionAttributeValues: Record<string, unknown>;
}

/**
 * Complete (3): COMPLETED with the response; retained until `expires_at`. It leaves the index of keys in flight (its
 * shard removed), as a failure does, in the same write.
 */
export function completion(response: string | Uint8Array, nowSeconds: number): Transition {
  return {
    UpdateExpression:
      'SET #status = :completed, #response = :response, #expires = :expiresAt, #completed = :now REMOVE #inflight',
    ExpressionAttributeValues: { ':completed': 'COMPLETED', ':response': response, ':now': nowSeconds },
  };
}

/** Fail (4): FAILED, claimable again at once. */
export const FAILURE: Transition = {
  UpdateExpression: 'SET #status = :failed, #expires = :expiresAt REMOVE #inflight',
  ExpressionAttributeValues: { ':failed': 'FAILED' },
};

/** Fail (4) of a run that started no step it did not record: it is taken off the run count (see `FailInput`). */
export const FAILURE_FORGETTING_RUN: Transition = {
  UpdateExpression: 'SET #status = :failed, #expires = :expiresAt REMOVE #inflight ADD #runs :minusOne',
  ExpressionAttributeValues: { ':failed': 'FAILED', ':minusOne': -1 },
};

/** The owner's own release after its work ended (`FailInput.endedCleanly`): its owners are forgotten too. */
export function cleanly(failure: Transition): Transition {
  const [set, add] = failure.UpdateExpression.split(' ADD ');
  const update = `${set}, #owners${add === undefined ? '' : ` ADD ${add}`}`;
  return { UpdateExpression: update, ExpressionAttributeValues: failure.ExpressionAttributeValues };
}

/** A final failure (a poisoned key): FAILED with the problem every duplicate gets, until it expires. */
export function finalFailure(response: string | Uint8Array): Transition {
  return {
    UpdateExpression: 'SET #status = :failed, #expires = :expiresAt, #response = :response REMOVE #inflight',
    ExpressionAttributeValues: { ':failed': 'FAILED', ':response': response },
  };
}

/** Renew (4b): the lease moves on, and the record says when (`keys:inspect` tells a live owner from a dead one). */
export function renewal(nowSeconds: number): Transition {
  return {
    UpdateExpression: 'SET #expires = :expiresAt, #renewed = :now',
    ExpressionAttributeValues: { ':now': nowSeconds },
  };
}

/**
 * The reconciler's release of a stuck lease: the claim's, and only if its lease ended before the sweep's cutoff. It
 * read the lease from an eventually consistent index or scan: a lease renewed since is its owner's.
 */
export const STUCK_LEASE = `${OWNED_BY_CLAIM} AND #expires < :leaseEndedBefore`;

/**
 * A transition guarded by the claim (and with `leaseEndedBefore`, by its lease having ended: `STUCK_LEASE`), in the
 * DocumentClient's form (plain values: a transaction action as it is); the record comes back when the guard fails.
 */
export function guarded(
  layout: TableLayout,
  claimToken: string,
  expiresAt: number,
  transition: Transition,
  leaseEndedBefore?: number,
) {
  const condition = leaseEndedBefore === undefined ? OWNED_BY_CLAIM : STUCK_LEASE;
  const update = {
    UpdateExpression: transition.UpdateExpression,
    ConditionExpression: condition,
    ExpressionAttributeNames: names(layout, transition.UpdateExpression, condition),
    // The transition's values last: fields added to an object made by a spread are V8's slow path (about 2 µs).
    ExpressionAttributeValues: {
      ':expiresAt': expiresAt,
      ':pending': 'PENDING',
      ':token': claimToken,
      ...transition.ExpressionAttributeValues,
    } as Record<string, unknown>,
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD' as const,
  };
  if (leaseEndedBefore !== undefined) update.ExpressionAttributeValues[':leaseEndedBefore'] = leaseEndedBefore; // rare
  return update;
}

/** The guarded transition as one UpdateItem. */
export function updateRequest(
  tableName: string,
  layout: TableLayout,
  location: RecordLocation,
  update: ReturnType<typeof guarded>,
): UpdateItemCommandInput {
  return {
    TableName: tableName,
    Key: layout.itemKey(location.key, location.partition),
    UpdateExpression: update.UpdateExpression,
    ConditionExpression: update.ConditionExpression,
    ExpressionAttributeNames: update.ExpressionAttributeNames,
    ExpressionAttributeValues: attributeValues(update.ExpressionAttributeValues),
    ReturnValuesOnConditionCheckFailure: update.ReturnValuesOnConditionCheckFailure,
  };
}

/** A strongly consistent read of one record. */
export function getRequest(
  tableName: string,
  layout: TableLayout,
  { key, partition }: RecordLocation,
): GetItemCommandInput {
  return { TableName: tableName, Key: layout.itemKey(key, partition), ConsistentRead: true };
}

/**
 * One page of a scan over the module's records, without their responses: in a shared table only the items that are
 * records (they have a claim token) under the key prefix.
 */
export function scanRequest(
  tableName: string,
  layout: TableLayout,
  pageSize: number,
  startKey?: ScanCommandInput['ExclusiveStartKey'],
  segment?: { index: number; total: number },
): ScanCommandInput {
  const filter = layout.keyPrefix
    ? `attribute_exists(#token) AND begins_with(#key, :prefix)`
    : 'attribute_exists(#token)';
  const projection = layout.sortKey ? `${STATE}, #sk` : STATE;
  return {
    TableName: tableName,
    Limit: pageSize,
    ExclusiveStartKey: startKey,
    ...(segment ? { Segment: segment.index, TotalSegments: segment.total } : {}),
    ProjectionExpression: projection,
    FilterExpression: filter,
    ExpressionAttributeNames: {
      ...names(layout, projection, filter),
      ...(layout.keyPrefix ? { '#key': layout.recordKeyAttribute } : {}),
    },
    ...(layout.keyPrefix ? { ExpressionAttributeValues: { ':prefix': { S: layout.keyPrefix } } } : {}),
  };
}

/** One page of one partition's records (a sort-key layout): a Query, under the key prefix, without responses. */
export function queryRequest(
  tableName: string,
  layout: TableLayout,
  partition: string,
  pageSize: number,
  startKey?: QueryCommandInput['ExclusiveStartKey'],
): QueryCommandInput {
  // Without a key prefix, the partition alone: DynamoDB refuses begins_with on an empty string.
  const condition = layout.keyPrefix ? '#pk = :partition AND begins_with(#sk, :prefix)' : '#pk = :partition';
  const projection = `${STATE}, #sk`;
  return {
    TableName: tableName,
    Limit: pageSize,
    ExclusiveStartKey: startKey,
    KeyConditionExpression: condition,
    ProjectionExpression: projection,
    ExpressionAttributeNames: names(layout, condition, projection),
    ExpressionAttributeValues: attributeValues(
      layout.keyPrefix ? { ':partition': partition, ':prefix': layout.keyPrefix } : { ':partition': partition },
    ),
    ConsistentRead: true,
  };
}

/**
 * One page of one shard of the index of keys in flight (`layout.inFlightIndex`), by the lease's end: only those that
 * ended before `leaseEndedBefore` when given (a sweep's stuck leases). The index holds PENDING records only (the
 * attribute it is keyed by is written by a claim and removed by every write that ends the lease), with what a sweep
 * reads of them.
 */
export function inFlightQueryRequest(
  tableName: string,
  layout: TableLayout,
  shard: number,
  pageSize: number,
  startKey?: QueryCommandInput['ExclusiveStartKey'],
  leaseEndedBefore?: number,
): QueryCommandInput {
  const condition =
    leaseEndedBefore === undefined ? '#inflight = :shard' : '#inflight = :shard AND #expires < :leaseEndedBefore';
  return {
    TableName: tableName,
    IndexName: layout.inFlightIndex,
    Limit: pageSize,
    ExclusiveStartKey: startKey,
    KeyConditionExpression: condition,
    ExpressionAttributeNames: names(layout, condition),
    ExpressionAttributeValues: attributeValues({
      ':shard': layout.inFlightShardValue(shard),
      ...(leaseEndedBefore === undefined ? {} : { ':leaseEndedBefore': leaseEndedBefore }),
    }),
  };
}
