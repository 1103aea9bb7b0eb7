import { IdempotencyStoreThrottledError, IdempotencyStoreUnavailableError } from '../errors/idempotency.errors';
import { cancellationOf } from './commit-transaction';

/**
 * A cancelled `TransactWriteItems` read reason by reason, for the reasons no local server gives on demand:
 * throttling, a conflict, a refusal without its message.
 */
const cancelled = (...reasons: { Code?: string; Message?: string; Item?: Record<string, unknown> }[]) =>
  Object.assign(new Error('Transaction cancelled'), {
    name: 'TransactionCanceledException',
    CancellationReasons: reasons,
  });

describe('a cancelled commit (cancellationOf)', () => {
  it("answers the completion's refusal with the record DynamoDB returned, before any write's own", () => {
    const item = { pk: 'k', status: 'COMPLETED' };
    const error = cancelled({ Code: 'ConditionalCheckFailed' }, { Code: 'ConditionalCheckFailed', Item: item });
    expect(cancellationOf(error, 1)).toEqual({ completionRefused: { Code: 'ConditionalCheckFailed', Item: item } });
  });

  it('names the write whose own condition failed', () => {
    const secondRefused = cancelled({ Code: 'None' }, { Code: 'ConditionalCheckFailed' }, { Code: 'None' });
    expect(cancellationOf(secondRefused, 2)).toEqual({ writeIndex: 1 });
  });

  it('throws throttling and conflicts as store faults, with the error as their cause', () => {
    const throttled = cancelled({ Code: 'None' }, { Code: 'ThrottlingError' });
    const fault = thrownBy(() => cancellationOf(throttled, 1));
    expect(fault).toBeInstanceOf(IdempotencyStoreThrottledError);
    expect(fault.cause).toBe(throttled);
    const conflict = cancelled({ Code: 'TransactionConflict' }, { Code: 'None' });
    expect(thrownBy(() => cancellationOf(conflict, 1))).toBeInstanceOf(IdempotencyStoreUnavailableError);
  });

  it('names the action and the reason of any other refusal, with or without its message', () => {
    const invalid = cancelled({ Code: 'ValidationError', Message: 'too big' }, { Code: 'None' });
    const refused = thrownBy(() => cancellationOf(invalid, 1));
    expect(refused.message).toBe('TransactWriteItems refused write 0 of commitWith: ValidationError: too big');
    expect(refused.cause).toBe(invalid);
    const unexplained = cancelled({ Code: 'None' }, { Code: 'ItemCollectionSizeLimitExceeded' });
    expect(thrownBy(() => cancellationOf(unexplained, 1)).message).toBe(
      'TransactWriteItems refused the completion: ItemCollectionSizeLimitExceeded: ',
    );
  });
});

function thrownBy(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('nothing was thrown');
}
