import { IdempotencyStoreThrottledError, IdempotencyStoreUnavailableError } from '../idempotency.errors';

const THROTTLING_ERRORS = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
]);

/** The DynamoDB error name, for logs (`dynamo_error_code`) and for branching. Never the message text. */
export function dynamoErrorCode(error: unknown): string {
  const { name, code } = (error ?? {}) as { name?: unknown; code?: unknown };
  if (typeof name === 'string' && name !== 'Error') return name;
  if (typeof code === 'string') return code;
  return 'UnknownError';
}

/** A failed condition: the normal "someone else owns this key" signal, never a fault. */
export function isConditionalCheckFailed(error: unknown): error is { Item?: Record<string, unknown> } {
  return dynamoErrorCode(error) === 'ConditionalCheckFailedException';
}

/** Throttling (after the SDK's own retries) and everything else are distinct outcomes; both fail closed. */
export function toStoreError(operation: string, error: unknown): Error {
  const code = dynamoErrorCode(error);
  return THROTTLING_ERRORS.has(code)
    ? new IdempotencyStoreThrottledError(operation, code, { cause: error })
    : new IdempotencyStoreUnavailableError(operation, code, { cause: error });
}
