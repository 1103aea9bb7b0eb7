import {
  IdempotencyStoreMisconfiguredError,
  IdempotencyStoreThrottledError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';

/** The DynamoDB error names of throttling: a 503 `store-throttled`, never a duplicate (the alert rules name them too). */
export const THROTTLING_ERRORS = new Set([
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

/**
 * Answers that retrying will not change, each with what fixes it: the store is set up or permitted wrongly, not
 * overloaded or away.
 */
const MISCONFIGURATION_FIXES: Record<string, string> = {
  AccessDeniedException: "grant these credentials the module's DynamoDB actions on the table (see IAM in the docs)",
  ResourceNotFoundException:
    'create the table (npx nestjs-dynamodb-idempotency table:create), or set tableName to the one that exists',
  ValidationException:
    "DynamoDB refused the request as invalid: check the table's key schema with npx nestjs-dynamodb-idempotency table:check",
  UnrecognizedClientException: 'DynamoDB does not know these credentials: check the access key and the region',
  InvalidSignatureException: 'DynamoDB rejected the request signature: check the secret key and the region',
  CredentialsProviderError:
    'no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile or a role',
};

/** What fixes a store error that retrying will not, or undefined for a fault that may pass (throttling, an outage). */
export function misconfigurationFix(error: unknown): string | undefined {
  if (isItemTooLarge(error)) return ITEM_TOO_LARGE_FIX;
  return MISCONFIGURATION_FIXES[dynamoErrorCode(error)];
}

const ITEM_TOO_LARGE = /item size (to update )?has exceeded the maximum allowed size/i;
const ITEM_TOO_LARGE_FIX =
  "the record would pass DynamoDB's 400 KB item limit: record smaller steps and responses (see the limits in the docs)";

/**
 * DynamoDB's answer to a write that would make an item pass 400 KB: a ValidationException that only its message tells
 * apart from an invalid request (it has no code of its own); seen through the module's store error too.
 */
export function isItemTooLarge(error: unknown): boolean {
  const refused = error instanceof IdempotencyStoreMisconfiguredError ? error.cause : error;
  const message = (refused as { message?: unknown } | undefined)?.message;
  return dynamoErrorCode(refused) === 'ValidationException' && ITEM_TOO_LARGE.test(String(message));
}

/** Throttling (after the SDK's own retries), misconfiguration and everything else are distinct outcomes; all fail closed. */
export function toStoreError(operation: string, error: unknown): Error {
  const code = dynamoErrorCode(error);
  if (THROTTLING_ERRORS.has(code)) {
    return new IdempotencyStoreThrottledError(operation, code, { cause: error, reasons: throttlingReasons(error) });
  }
  if (MISCONFIGURATION_FIXES[code]) return new IdempotencyStoreMisconfiguredError(operation, code, { cause: error });
  return new IdempotencyStoreUnavailableError(operation, code, { cause: error });
}

/**
 * What DynamoDB names as throttled (`IndexWriteProvisionedThroughputExceeded on …/index/in_flight`): a throttled index
 * throttles the table's writes, and only these reasons tell it from the table's own capacity.
 */
export function throttlingReasons(error: unknown): string[] {
  const reasons = (error as { ThrottlingReasons?: unknown } | undefined)?.ThrottlingReasons;
  if (!Array.isArray(reasons)) return [];
  return reasons.map((given: { reason?: unknown; resource?: unknown }) =>
    [given?.reason, given?.resource].filter((part) => typeof part === 'string').join(' on '),
  );
}
