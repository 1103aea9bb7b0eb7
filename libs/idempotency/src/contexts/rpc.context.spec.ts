import { RpcException } from '@nestjs/microservices';
import {
  IdempotencyInFlightError,
  IdempotencyMismatchError,
  IdempotencyStoreThrottledError,
} from '../errors/idempotency.errors';
import { ProblemType } from '../errors/outcomes';
import { RpcContextAdapter } from './rpc.context';

describe('RpcContextAdapter.problem', () => {
  const adapter = new RpcContextAdapter();
  const payload = (error: Error) => (adapter.problem(error as never) as RpcException).getError();

  it('gives a 409 in flight its retry delay, as HTTP gives Retry-After', () => {
    expect(payload(new IdempotencyInFlightError(3))).toMatchObject({
      type: ProblemType.inFlight,
      status: 409,
      retryAfterSeconds: 3,
    });
  });

  it('gives a throttled store its retry delay too, and a mismatch none', () => {
    expect(payload(new IdempotencyStoreThrottledError('claim', 'ThrottlingException'))).toMatchObject({
      status: 503,
      retryAfterSeconds: expect.any(Number),
    });
    expect(payload(new IdempotencyMismatchError())).not.toHaveProperty('retryAfterSeconds');
  });
});
