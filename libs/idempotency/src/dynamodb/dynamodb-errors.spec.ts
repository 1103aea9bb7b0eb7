import {
  IdempotencyStoreMisconfiguredError,
  IdempotencyStoreThrottledError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import {
  dynamoErrorCode,
  isConditionalCheckFailed,
  isReplicatedWriteConflict,
  isTransactionCanceled,
  misconfigurationFix,
  toStoreError,
} from './dynamodb-errors';

/** How a DynamoDB or network error is named and classed: a duplicate, a fault that may pass, or a misconfiguration. */
const named = (name: string, message = 'x') => Object.assign(new Error(message), { name });

describe('dynamoErrorCode', () => {
  it("prefers a system error's code, then the error's own name", () => {
    expect(dynamoErrorCode(Object.assign(named('TimeoutError'), { code: 'ETIMEDOUT' }))).toBe('ETIMEDOUT');
    expect(dynamoErrorCode(named('ConditionalCheckFailedException'))).toBe('ConditionalCheckFailedException');
  });

  it("reads the code from the SDK's wrapper of an error it did not recognise", () => {
    const wrapped = (text: string) => dynamoErrorCode(new Error(`AWS SDK error wrapper for ${text}`));
    expect(wrapped('Error: read ECONNRESET')).toBe('ECONNRESET');
    expect(wrapped('Error: connect ECONNREFUSED 127.0.0.1:1')).toBe('ECONNREFUSED');
    expect(wrapped('Error: socket hang up')).toBe('ECONNRESET');
    expect(wrapped('TimeoutError: the request took too long')).toBe('TimeoutError');
    expect(wrapped('AbortError')).toBe('AbortError');
    expect(wrapped('Error:ECONNRESET')).toBe('ECONNRESET'); // no space after the colon
  });

  it('reads only the wrapper at the start of a message, not the same words quoted inside another', () => {
    expect(dynamoErrorCode(new Error('retried: AWS SDK error wrapper for Error: read ECONNRESET'))).toBe(
      'UnknownError',
    );
  });

  it('is UnknownError for a plain Error, a string or nothing', () => {
    expect(dynamoErrorCode(new Error('something else'))).toBe('UnknownError');
    expect(dynamoErrorCode('ECONNRESET')).toBe('UnknownError');
    expect(dynamoErrorCode(undefined)).toBe('UnknownError');
    expect(dynamoErrorCode({ name: 7, message: 7 })).toBe('UnknownError');
  });

  it('tells the answers apart from faults', () => {
    expect(isConditionalCheckFailed(named('ConditionalCheckFailedException'))).toBe(true);
    expect(isConditionalCheckFailed(named('TransactionCanceledException'))).toBe(false);
    expect(isTransactionCanceled(named('TransactionCanceledException'))).toBe(true);
    expect(isTransactionCanceled(named('ConditionalCheckFailedException'))).toBe(false);
    expect(isReplicatedWriteConflict(named('ReplicatedWriteConflictException'))).toBe(true);
    expect(isReplicatedWriteConflict(named('ConditionalCheckFailedException'))).toBe(false);
  });
});

describe('toStoreError', () => {
  it.each(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded'])(
    'makes %s a throttled store (503 store-throttled), never a duplicate',
    (code) => {
      const cause = named(code);
      const error = toStoreError('claim', cause);
      expect(error).toBeInstanceOf(IdempotencyStoreThrottledError);
      expect(error).toMatchObject({ operation: 'claim', dynamoErrorCode: code, cause });
    },
  );

  it.each([
    ['AccessDeniedException', 'IAM in the docs'],
    ['ResourceNotFoundException', 'table:create'],
    ['ValidationException', 'table:check'],
    ['UnrecognizedClientException', 'the access key and the region'],
    ['InvalidSignatureException', 'the secret key and the region'],
    ['CredentialsProviderError', 'AWS_ACCESS_KEY_ID'],
  ])('makes %s a misconfigured store, with its fix', (code, fix) => {
    const cause = named(code);
    const error = toStoreError('complete', cause);
    expect(error).toBeInstanceOf(IdempotencyStoreMisconfiguredError);
    expect(error).toMatchObject({ operation: 'complete', dynamoErrorCode: code, cause });
    expect(misconfigurationFix(named(code))).toContain(fix);
  });

  it('makes anything else an unavailable store, which retrying may fix', () => {
    const cause = named('InternalServerError');
    const error = toStoreError('get', cause);
    expect(error).toBeInstanceOf(IdempotencyStoreUnavailableError);
    expect(error).toMatchObject({ operation: 'get', dynamoErrorCode: 'InternalServerError', cause });
    expect(misconfigurationFix(named('InternalServerError'))).toBeUndefined();
  });
});
