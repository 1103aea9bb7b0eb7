import { UpdateItemCommandInput } from '@aws-sdk/client-dynamodb';
import { IdempotencyRecord } from '../repository/idempotency.record';
import { ClaimInput, RecordLocation, RecordStepInput, StartStepInput } from '../repository/idempotency.repository';
import { attributeValues, names } from './item-mapping';
import { stepKey } from '../response/step-value';
import { MapValue, startedStepItem, stepItem } from './step-mapping';
import { CLAIMABLE, OWNED_BY_CLAIM } from './record-requests';
import { TableLayout } from './table-layout';

/**
 * The claim and the recovery points (steps), as DynamoDB receives them. A claim is an `UpdateItem`, so that a claim
 * that resumes a request keeps the steps it recorded and learns them from the old item (`ReturnValues: ALL_OLD`)
 * without a read. It comes in two forms:
 *
 * - resume (the claim every request sends first): wins a new key, or the same request's FAILED attempt or expired
 *   lease; keeps `steps` and counts the run in `runs`.
 * - restart (sent only after the resume form lost to a claimable record of another request, or to an expired
 *   completed one): wins only the record as it was read (its claim token and status), and drops its steps. The status
 *   matters where the token stays: a lease read past its end whose owner failed meanwhile, keeping its steps for its
 *   own request's retry, is read again (and refused as a mismatch), not restarted over them.
 */

/**
 * The same request (fingerprint) left unfinished: a FAILED attempt (a final failure only once expired), or a lease past
 * its end by the skew margin.
 */
const RESUMABLE =
  'attribute_not_exists(#pk) OR (#fingerprint = :fingerprint AND ((#status = :failed AND (attribute_not_exists(#response) OR #expires < :now)) OR (#status = :pending AND #expires < :leaseCutoff)))';
/** Every claim: the PENDING record, its lease, and its shard of the index of keys in flight (`in_flight`). */
const CLAIM =
  'SET #status = :pending, #expires = :expiresAt, #token = :token, #fingerprint = :fingerprint, #pending = :now, #holder = :holder, #inflight = :shard';
/** A resume keeps the steps and the owners since the last clean end (`IdempotencyRecord.owners`), and adds itself. */
const RESUME = `${CLAIM}, #steps = if_not_exists(#steps, :noSteps), #owners = list_append(if_not_exists(#owners, :noOwners), :owner) REMOVE #response, #completed, #renewed ADD #runs :one`;
const RESTART = `${CLAIM}, #steps = :noSteps, #runs = :one, #owners = :owner REMOVE #response, #completed, #renewed`;
const RESTARTABLE = `(${CLAIMABLE}) AND #token = :readToken AND #status = :readStatus`;
/** A versioned claim (`ClaimInput.version`) writes its version; a claim without one leaves the attribute as it is. */
const versioned = (update: string) => update.replace(' REMOVE ', ', #version = :version REMOVE ');
const RESUME_VERSIONED = versioned(RESUME);
const RESTART_VERSIONED = versioned(RESTART);
/** `onVersionChange` 'refuse' or 'restart': a resume wins only a record of its version, or one without steps. */
const RESUMABLE_SAME_VERSION = `(${RESUMABLE}) AND (attribute_not_exists(#pk) OR #version = :version OR attribute_not_exists(#steps) OR size(#steps) = :zero)`;
const RECORD_STEP = 'SET #steps.#step = :step';

/** A claim as sent: the caller's input, the new claim token, and the time it is sent at (epoch seconds). */
export interface ClaimRequest {
  claim: ClaimInput;
  claimToken: string;
  nowSeconds: number;
}

const NO_STEPS = new MapValue({});
const NO_OWNERS: string[] = [];

/** Claim (1), resume form: the old item comes back on a win (its steps) and on a loss (the record to answer from). */
export function resumeClaimRequest(
  tableName: string,
  layout: TableLayout,
  request: ClaimRequest,
): UpdateItemCommandInput {
  return claimUpdate(tableName, layout, request, undefined);
}

/** The record a restart form takes over, as its claim read it. */
export type RecordRead = Pick<IdempotencyRecord, 'claimToken' | 'status'>;

/** Claim (1), restart form: the record `read` is taken over from scratch, without its steps. */
export function restartClaimRequest(
  tableName: string,
  layout: TableLayout,
  request: ClaimRequest,
  read: RecordRead,
): UpdateItemCommandInput {
  return claimUpdate(tableName, layout, request, read);
}

/** Either form, built whole (it is sent for every new key: no member is added afterwards). */
function claimUpdate(
  tableName: string,
  layout: TableLayout,
  request: ClaimRequest,
  read: RecordRead | undefined,
): UpdateItemCommandInput {
  const { claimToken, nowSeconds } = request;
  const { key, partition, fingerprint, leaseSeconds, clockSkewSeconds = 0, holder = '', version } = request.claim;
  const [update, condition] = forms(read === undefined, request.claim);
  const values = attributeValues({
    ':pending': 'PENDING',
    ':failed': 'FAILED',
    ':expiresAt': nowSeconds + leaseSeconds,
    ':token': claimToken,
    ':fingerprint': fingerprint,
    ':now': nowSeconds,
    ':leaseCutoff': nowSeconds - clockSkewSeconds,
    ':noSteps': NO_STEPS,
    ':one': 1,
    ':holder': holder,
    ':shard': layout.inFlightShard(key),
    ':owner': [holder],
    ':noOwners': NO_OWNERS,
  });
  if (version !== undefined) {
    values[':version'] = { S: version };
    if (condition === RESUMABLE_SAME_VERSION) values[':zero'] = { N: '0' };
  }
  if (read !== undefined) {
    // the rare path only (the restart form starts the owners afresh)
    values[':readToken'] = { S: read.claimToken };
    values[':readStatus'] = { S: read.status };
    delete values[':noOwners'];
  }
  return {
    TableName: tableName,
    Key: layout.itemKey(key, partition),
    UpdateExpression: update,
    ConditionExpression: condition,
    ExpressionAttributeNames: names(layout, update, condition),
    ExpressionAttributeValues: values,
    ReturnValues: read === undefined ? 'ALL_OLD' : 'NONE',
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}

/** A claim's update and condition: the resume or restart form, versioned or not. */
function forms(resume: boolean, { version, onVersionChange = 'refuse' }: ClaimInput): [string, string] {
  if (version === undefined) return resume ? [RESUME, RESUMABLE] : [RESTART, RESTARTABLE];
  if (!resume) return [RESTART_VERSIONED, RESTARTABLE];
  return [RESUME_VERSIONED, onVersionChange === 'resume' ? RESUMABLE : RESUMABLE_SAME_VERSION];
}

/**
 * The start of an at-most-once step, recorded on the PENDING record before its function runs, only while this claim
 * owns it (the record comes back otherwise). Its result, once recorded (`recordStepRequest`), replaces it.
 */
export function startStepRequest(
  tableName: string,
  layout: TableLayout,
  { key, partition, claimToken, step }: StartStepInput,
  nowSeconds: number,
): UpdateItemCommandInput {
  return stepUpdate(
    tableName,
    layout,
    { key, partition, claimToken },
    step.name,
    startedStepItem({ ...step, startedAt: nowSeconds }),
  );
}

/** A step's result, recorded on the PENDING record only while this claim owns it; the record comes back otherwise. */
export function recordStepRequest(
  tableName: string,
  layout: TableLayout,
  { key, partition, claimToken, step }: RecordStepInput,
  nowSeconds: number,
): UpdateItemCommandInput {
  return stepUpdate(
    tableName,
    layout,
    { key, partition, claimToken },
    step.name,
    stepItem({ ...step, recordedAt: nowSeconds }),
  );
}

/** A step's entry in the `steps` map set, under `OWNED_BY_CLAIM`. */
function stepUpdate(
  tableName: string,
  layout: TableLayout,
  { key, partition, claimToken }: RecordLocation & { claimToken: string },
  name: string,
  entry: MapValue,
): UpdateItemCommandInput {
  return {
    TableName: tableName,
    Key: layout.itemKey(key, partition),
    UpdateExpression: RECORD_STEP,
    ConditionExpression: OWNED_BY_CLAIM,
    ExpressionAttributeNames: { ...names(layout, RECORD_STEP, OWNED_BY_CLAIM), '#step': stepKey(name) },
    ExpressionAttributeValues: attributeValues({ ':step': entry, ':pending': 'PENDING', ':token': claimToken }),
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}
