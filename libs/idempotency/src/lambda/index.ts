// nestjs-dynamodb-idempotency/lambda: what a function on AWS Lambda uses (also exported by the main entry).
export { processBatch } from './batch-processor';
export type { BatchOptions, BatchResponse } from './batch-processor';
export type { BatchRecord, DynamoDbStreamRecordLike, KinesisRecordLike, SqsRecordLike } from './batch-records';
export { withLambdaContext } from './lambda-invocation';
export type { LambdaContextLike } from './lambda-invocation';
export { onLambda } from './lambda-environment';
