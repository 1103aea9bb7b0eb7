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

  key(call: InterceptedCall): unknown {
    return call.route.key?.(this.input(call), call.context);
  }

  missingKey(): string {
    return 'This message handler is idempotent; its key function found no key.';
  }

  request(): undefined {
    return undefined;
  }

  input({ context }: InterceptedCall): unknown {
    return context.switchToRpc().getData();
  }

  async fingerprint({ context, route }: InterceptedCall, chosen?: string): Promise<string> {
    const message = chosen === undefined ? context.switchToRpc().getData() : { $fingerprint: chosen };
    return fingerprintValue(['RPC', route.name ?? rpcPattern(context), message]);
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
