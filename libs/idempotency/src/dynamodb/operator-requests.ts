import { DeleteItemCommandInput, UpdateItemCommandInput } from '@aws-sdk/client-dynamodb';
import { RecordLocation } from '../repository/idempotency.repository';
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
