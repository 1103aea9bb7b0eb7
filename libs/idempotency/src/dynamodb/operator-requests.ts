import { DeleteItemCommandInput, UpdateItemCommandInput } from '@aws-sdk/client-dynamodb';
import { RecordLocation, ReviseStepsInput } from '../repository/idempotency.repository';
import { stepKey } from '../response/step-value';
import { stepItem } from './step-mapping';
import { attributeValues, names } from './item-mapping';
import { TableLayout } from './table-layout';

/** An operator's writes (`IdempotencyAdmin`), each conditioned on the record as the command read it. */

/** An operator's removal: only while the record has the status and claim token it was read with. */
export function removeRequest(
  tableName: string,
  layout: TableLayout,
  location: RecordLocation,
  read: { claimToken: string; status: string },
): DeleteItemCommandInput {
  const condition = '#status = :status AND #token = :token';
  return {
    TableName: tableName,
    Key: layout.itemKey(location.key, location.partition),
    ConditionExpression: condition,
    ExpressionAttributeNames: names(layout, condition),
    ExpressionAttributeValues: attributeValues({ ':status': read.status, ':token': read.claimToken }),
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}

/** An operator's release of a final failure that holds steps: claimable again, its steps and owners kept. */
export function reopenRequest(
  tableName: string,
  layout: TableLayout,
  location: RecordLocation,
  claimToken: string,
): UpdateItemCommandInput {
  const condition = '#status = :failed AND #token = :token AND attribute_exists(#response)';
  const update = 'REMOVE #response';
  return {
    TableName: tableName,
    Key: layout.itemKey(location.key, location.partition),
    UpdateExpression: update,
    ConditionExpression: condition,
    ExpressionAttributeNames: names(layout, update, condition),
    ExpressionAttributeValues: attributeValues({ ':failed': 'FAILED', ':token': claimToken }),
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}

/**
 * An operator's revision of a request's steps (`ReviseStepsInput`): released (FAILED, out of the index of keys in
 * flight, a final failure's response removed), the forgotten steps removed from the `steps` map and the settled one set in its start's place, only while
 * the record is as it was read (a PENDING one only past its lease).
 */
export function reviseStepsRequest(
  tableName: string,
  layout: TableLayout,
  input: ReviseStepsInput,
  nowSeconds: number,
): UpdateItemCommandInput {
  const { key, partition, claimToken, status, leaseEndedBefore, forget, settle, ttlSeconds } = input;
  const stepNames: Record<string, string> = {};
  const forgotten = forget.map((name, index) => {
    stepNames[`#forget${index}`] = stepKey(name);
    return `#steps.#forget${index}`;
  });
  const values: Record<string, unknown> = { ':failed': 'FAILED', ':expires': nowSeconds + ttlSeconds };
  let set = 'SET #status = :failed, #expires = :expires';
  if (settle) {
    stepNames['#settle'] = stepKey(settle.name);
    values[':settled'] = stepItem({ ...settle, recordedAt: nowSeconds });
    set += ', #steps.#settle = :settled';
  }
  // Released: out of the index of keys in flight too.
  const update = `${set} REMOVE ${['#response', '#inflight', ...forgotten].join(', ')}`;
  let condition = '#status = :status AND #token = :token';
  if (status === 'PENDING') condition += ' AND #expires < :leaseEndedBefore';
  Object.assign(values, { ':status': status, ':token': claimToken });
  if (status === 'PENDING') values[':leaseEndedBefore'] = leaseEndedBefore ?? nowSeconds;
  return {
    TableName: tableName,
    Key: layout.itemKey(key, partition),
    UpdateExpression: update,
    ConditionExpression: condition,
    ExpressionAttributeNames: { ...names(layout, update, condition), ...stepNames },
    ExpressionAttributeValues: attributeValues(values),
    ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
  };
}
