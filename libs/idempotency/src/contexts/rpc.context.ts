import { Injectable } from '@nestjs/common';
import { fingerprintValue } from '../keys/fingerprint';
import { IdempotencyError } from '../errors/idempotency.errors';
import { IdempotencyProblemException } from '../errors/problem';
import { StoredResponse } from '../repository/idempotency.record';
import { rpcPattern } from './route-identity';
import { replayedException, storedException } from '../response/stored-exception';
import { replayedBody, storedTypedResult } from '../response/stored-response.codec';
import { ContextAdapter, InterceptedCall } from './context-adapter';
import { loadMicroservices } from '../optional-peers';

/**
 * Message handlers (`@EventPattern`, `@MessagePattern`): the key from the route's `key` function of the message, the
 * fingerprint over the pattern and the message. Protocol errors reach the client as an `RpcException` carrying the
 * same problem body as over HTTP.
 */
@Injectable()
export class RpcContextAdapter implements ContextAdapter {
  operation({ context, route }: InterceptedCall): string {
    return route.name ?? `RPC ${rpcPattern(context)}`;
  }

  key({ context, route }: InterceptedCall): unknown {
    return route.key?.(context.switchToRpc().getData(), context);
  }

  missingKey(): string {
    return 'This message handler is idempotent; its key function found no key.';
  }

  request(): undefined {
    return undefined;
  }

  async fingerprint({ context, route }: InterceptedCall): Promise<string> {
    return fingerprintValue(['RPC', route.name ?? rpcPattern(context), context.switchToRpc().getData()]);
  }

  capture(value: unknown): StoredResponse {
    return storedTypedResult(value);
  }

  captureError(error: unknown): StoredResponse | undefined {
    return storedException(error, { rpc: true });
  }

  replay(stored: StoredResponse): unknown {
    if (stored.exception) throw replayedException(stored);
    return replayedBody(stored);
  }

  /** The problem body; with a retry delay (409 in flight, 503) its seconds as `retryAfterSeconds`, as HTTP's `Retry-After`. */
  problem(error: IdempotencyError): Error {
    const { RpcException } = loadMicroservices();
    const { problem, headers } = IdempotencyProblemException.from(error);
    const retryAfter = headers['Retry-After'];
    return new RpcException(retryAfter === undefined ? problem : { ...problem, retryAfterSeconds: Number(retryAfter) });
  }
}
