import { ExecutionContext, Injectable, Logger } from '@nestjs/common';
import { IdempotencyError, IdempotencyFingerprintFailedError } from '../errors/idempotency.errors';
import { fingerprintValue } from '../keys/fingerprint';
import { IdempotentMethodOptions, IdempotentOptions } from '../options/idempotency.options';
import { StoredResponse } from '../repository/idempotency.record';
import { replayedException, storedException } from '../response/stored-exception';
import { replayedBody, storedTypedResult } from '../response/stored-response.codec';
import { ContextAdapter, InterceptedCall } from './context-adapter';

/**
 * Provider methods (`@Idempotent()` on a queue processor, an event listener, a scheduled job): the key, the fingerprint
 * and the scope are the method's own functions of its arguments (`methodRoute`), the fingerprint by default its first
 * argument (the message, the event, the job's payload), as Powertools' method decorator takes it. A result is stored
 * as `execute()` stores one; a thrown `HttpException` is stored when `storeIf` calls it final, any other error releases
 * the key. Protocol errors reach the caller as the module's own errors (`IdempotencyInFlightError` …).
 */
@Injectable()
export class MethodContextAdapter implements ContextAdapter {
  private readonly logger = new Logger('Idempotency');

  operation({ context, route }: InterceptedCall): string {
    return route.name ?? `${context.getClass().name}.${context.getHandler().name}`;
  }

  key(call: InterceptedCall): unknown {
    return call.route.key?.(undefined, call.context);
  }

  missingKey(call: InterceptedCall): string {
    return `${this.operation(call)} is idempotent; its key function returned no key.`;
  }

  request(): undefined {
    return undefined;
  }

  input({ context }: InterceptedCall): unknown {
    return context.getArgs();
  }

  fingerprint(call: InterceptedCall, chosen?: string): string {
    const operation = this.operation(call);
    try {
      const value = chosen === undefined ? (call.context.getArgs()[0] ?? null) : { $fingerprint: chosen };
      return fingerprintValue(['METHOD', operation, value]);
    } catch (error) {
      this.logger.error({
        msg:
          'the first argument is not JSON, so it cannot be the fingerprint; give the method a fingerprint function ' +
          '(e.g. (job) => job.data). The method does not run',
        operation,
        error: String(error),
      });
      throw new IdempotencyFingerprintFailedError(operation);
    }
  }

  capture(value: unknown): StoredResponse {
    return storedTypedResult(value);
  }

  captureError(error: unknown): StoredResponse | undefined {
    return storedException(error);
  }

  replay(stored: StoredResponse): unknown {
    if (stored.exception) throw replayedException(stored);
    return replayedBody(stored);
  }

  problem(error: IdempotencyError): Error {
    return error;
  }
}

/**
 * A method's options as the call describer reads a route's: its functions of the arguments given the call's context
 * (whose arguments are the method's), and its scope alone (the module's reads an HTTP request).
 */
export function methodRoute(options: IdempotentMethodOptions): IdempotentOptions {
  const { key, fingerprint, scope } = options;
  const args = (context: ExecutionContext) => context.getArgs();
  return {
    ...options,
    key: (_: unknown, context) => key(...args(context)),
    fingerprint: fingerprint && ((_: unknown, context) => fingerprint(...args(context))),
    scope: typeof scope === 'function' ? (context) => scope(...args(context)) : scope ? () => scope : false,
  };
}
