import { IdempotencyStoreThrottledError, IdempotencyStoreUnavailableError } from '../idempotency.errors';

const THROTTLING_ERRORS = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
]);

/**
 * The DynamoDB error name (`ConditionalCheckFailedException`), or for a network fault the system error code
 * (`ECONNRESET`, `ECONNREFUSED`) or the SDK's own name (`TimeoutError`): for logs (`dynamo_error_code`) and for
 * branching.
 */
export function dynamoErrorCode(error: unknown): string {
  const { name, code, message } = (error ?? {}) as { name?: unknown; code?: unknown; message?: unknown };
  if (typeof code === 'string') return code;
  if (typeof name === 'string' && name !== 'Error') return name;
  return typeof message === 'string' ? (wrappedErrorCode(message) ?? 'UnknownError') : 'UnknownError';
}

/**
 * When the SDK receives a network error it does not recognise as an `Error` (one from another realm, as under Jest's
 * module sandbox), it throws `new Error('AWS SDK error wrapper for <the error as text>')`: the text is all that is
 * left of it, so the code is read from there (`read ECONNRESET`; Node's `socket hang up` is always ECONNRESET).
 */
function wrappedErrorCode(message: string): string | undefined {
  const wrapped = /^AWS SDK error wrapper for (\w+)(?::\s*(.*))?/s.exec(message);
  if (!wrapped) return undefined;
  const [, name, detail = ''] = wrapped;
  return /\b(E[A-Z]{3,})\b/.exec(detail)?.[1] ?? (detail.includes('socket hang up') ? 'ECONNRESET' : name);
}

/** A failed condition: the normal "someone else owns this key" signal, never a fault. */
export function isConditionalCheckFailed(error: unknown): error is { Item?: Record<string, unknown> } {
  return dynamoErrorCode(error) === 'ConditionalCheckFailedException';
}

/** A transaction cancelled for the reasons in its `CancellationReasons`, one per action. */
export function isTransactionCanceled(error: unknown): boolean {
  return dynamoErrorCode(error) === 'TransactionCanceledException';
}

/**
 * A write to an item that another Region wrote at the same moment (multi-Region strong consistency tables):
 * contention, never a fault and never an answer.
 */
export function isReplicatedWriteConflict(error: unknown): boolean {
  return dynamoErrorCode(error) === 'ReplicatedWriteConflictException';
}

/** Throttling (after the SDK's own retries) and everything else are distinct outcomes; both fail closed. */
export function toStoreError(operation: string, error: unknown): Error {
  const code = dynamoErrorCode(error);
  return THROTTLING_ERRORS.has(code)
    ? new IdempotencyStoreThrottledError(operation, code, { cause: error })
    : new IdempotencyStoreUnavailableError(operation, code, { cause: error });
}
