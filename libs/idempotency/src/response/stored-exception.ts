import * as common from '@nestjs/common';
import { HttpException } from '@nestjs/common';
import { StoredResponse } from '../repository/idempotency.record';
import { replayedBody, storableBody } from './stored-response.codec';
import { loadMicroservices } from '../optional-peers';

/**
 * A thrown `HttpException` (or on message handlers, `rpc`, an `RpcException`) as it can be stored and thrown again: its
 * status, its response (the body the app's exception filters format), its class name and the response's `headers` so
 * far. Undefined for any other error, which cannot be replayed. An `RpcException`'s status is the `status` (or
 * `statusCode`) its error object carries, else 500.
 */
export function storedException(
  error: unknown,
  { rpc = false, headers = {} }: { rpc?: boolean; headers?: Record<string, string | string[]> } = {},
): StoredResponse | undefined {
  if (error instanceof HttpException) {
    return {
      statusCode: error.getStatus(),
      headers,
      exception: error.constructor.name,
      ...storableBody(error.getResponse()),
    };
  }
  if (rpc && error instanceof loadMicroservices().RpcException) {
    const body = error.getError();
    const { status, statusCode } = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    const code = [status, statusCode].find((value): value is number => Number.isInteger(value));
    return { statusCode: code ?? 500, headers, exception: 'RpcException', ...storableBody(body) };
  }
  return undefined;
}

/**
 * The exception a stored error outcome is replayed as: the same status and response, of the same class when it is
 * one of Nest's built-in HTTP exceptions (so `@Catch(NotFoundException)` filters see it), else an `HttpException`;
 * an `RpcException` with the same error on message handlers.
 */
export function replayedException(stored: StoredResponse): Error {
  const body = replayedBody(stored) as string | Record<string, unknown>;
  if (stored.exception === 'RpcException') return new (loadMicroservices().RpcException)(body);
  const builtIn = (common as Record<string, unknown>)[stored.exception ?? ''];
  const type = typeof builtIn === 'function' && builtIn.prototype instanceof HttpException ? builtIn : HttpException;
  // HttpException's own constructor (status and response as given), with the built-in class as the prototype.
  return Reflect.construct(HttpException, [body, stored.statusCode], type) as HttpException;
}
