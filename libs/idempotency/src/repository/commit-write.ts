import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';

/**
 * One write of a handler's effects, in the DocumentClient's shape (`Put`, `Update`, `Delete` or `ConditionCheck`,
 * with plain JavaScript values), committed in one transaction with the completion (`IdempotencyContext.commitWith`).
 */
export type CommitWrite = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** DynamoDB allows 100 actions per transaction; the completion is one of them. */
export const MAX_COMMIT_WRITES = 99;
