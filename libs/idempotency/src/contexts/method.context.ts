import { ExecutionContext, Injectable, Logger } from '@nestjs/common';
import {
  IdempotencyError,
  IdempotencyFingerprintFailedError,
  IdempotencyRequestInvalidError,
} from '../errors/idempotency.errors';
import { fingerprintValue, MAX_FINGERPRINT_DEPTH } from '../keys/fingerprint';
import { IdempotentMethodOptions, IdempotentOptions } from '../options/idempotency.options';
import { StoredResponse } from '../repository/idempotency.record';
import { replayedException, storedException } from '../response/stored-exception';
import { replayedBody, storedTypedResult } from '../response/stored-response.codec';
import { ContextAdapter, InterceptedCall } from './context-adapter';

/**
 * Provider methods (`@Idempotent()` on a queue processor, an event listener, a scheduled job): the operation is the
 * method's `name` (required at startup), the key, the fingerprint and the scope are the method's own functions of its
 * arguments (`methodRoute`), the fingerprint by default every argument it receives less what a consumer framework adds
 * per delivery (`deliveredArguments`). A result is stored as `execute()` stores one; a thrown `HttpException` is stored
 * when `storeIf` calls it final, any other error releases the key. Protocol errors reach the caller as the module's
 * own errors (`IdempotencyInFlightError` …).
 */
@Injectable()
export class MethodContextAdapter implements ContextAdapter {
  private readonly logger = new Logger('Idempotency');

  operation({ route }: InterceptedCall): string {
    return route.name!;
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
      const value = chosen === undefined ? deliveredArguments(call.context.getArgs()) : { $fingerprint: chosen };
      return fingerprintValue(['METHOD', operation, value]);
    } catch (error) {
      if (error instanceof IdempotencyRequestInvalidError) {
        throw new IdempotencyRequestInvalidError(
          `${operation}: its arguments are nested deeper than ${MAX_FINGERPRINT_DEPTH} levels (or hold a cycle), ` +
            'deeper than a fingerprint takes; give the method a fingerprint function of what identifies the call. ' +
            'It was not run.',
        );
      }
      this.logger.error({
        msg:
          'the arguments are not JSON, so they cannot be the fingerprint; give the method a fingerprint function ' +
          '(e.g. (order) => order.id). The method does not run',
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
 * What a provider method's default fingerprint covers: every argument it receives, trailing `undefined`s left out (an
 * optional argument not passed), less what a consumer framework adds per delivery, which differs between two
 * deliveries of one message (docs/queues-and-jobs.md):
 * - an `AbortSignal` (BullMQ's third argument);
 * - a BullMQ `Job` is its `name` and `data`, and the lock token BullMQ passes after it is left out;
 * - an SQS message (`@ssut/nestjs-sqs`, `sqs-consumer`) is its `Body` and `MessageAttributes`, without its receipt
 *   handle and the counts SQS updates (`Attributes`).
 */
export function deliveredArguments(args: readonly unknown[]): unknown[] {
  const kept: unknown[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg instanceof AbortSignal) continue;
    if (isBullMqJob(arg)) {
      kept.push({ name: arg.name, data: arg.data ?? null });
      if (typeof args[i + 1] === 'string') i++; // the job's lock token
    } else if (isSqsMessage(arg)) {
      kept.push({ Body: arg.Body ?? null, MessageAttributes: arg.MessageAttributes ?? null });
    } else {
      kept.push(arg);
    }
  }
  while (kept.length > 0 && kept[kept.length - 1] === undefined) kept.pop();
  return kept;
}

/** A BullMQ `Job`, recognised by its shape (the package is not imported). */
function isBullMqJob(value: unknown): value is { name: unknown; data: unknown } {
  const job = value as { queueName?: unknown; attemptsMade?: unknown; updateProgress?: unknown } | null;
  return (
    typeof job === 'object' &&
    job !== null &&
    typeof job.queueName === 'string' &&
    typeof job.attemptsMade === 'number' &&
    typeof job.updateProgress === 'function'
  );
}

/** An SQS `Message` as `@aws-sdk/client-sqs` receives one (with its receipt handle). */
function isSqsMessage(value: unknown): value is { Body?: unknown; MessageAttributes?: unknown } {
  const message = value as { MessageId?: unknown; ReceiptHandle?: unknown } | null;
  return (
    typeof message === 'object' &&
    message !== null &&
    typeof message.MessageId === 'string' &&
    typeof message.ReceiptHandle === 'string'
  );
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
