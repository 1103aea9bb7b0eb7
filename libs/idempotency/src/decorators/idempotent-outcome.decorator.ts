import { applyDecorators, UseFilters, UseInterceptors } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { IdempotencyExceptionFilter } from '../contexts/idempotency-exception.filter';
import { OutcomeDoorInterceptor } from '../contexts/outcome-door.interceptor';

/** Options of `@IdempotentOutcome()`. */
export interface IdempotentOutcomeOptions {
  /**
   * Default true: the outcomes are private, so the operation must be scoped (`scope`): each caller reads only the
   * outcomes of its own keys, as the operation scopes them. `false`: the operation has no scope (its keys are unique by
   * construction) and its outcomes may be read by whoever sends a key.
   */
  private?: boolean;
  /** The longest `Prefer: wait=N` honoured, in seconds (a long poll). Default 10; at most 60. */
  maxWaitSeconds?: number;
}

/** The metadata `@IdempotentOutcome()` writes on a handler: the operation whose outcomes it answers, and its options. */
export const IdempotentOutcomeRoute = Reflector.createDecorator<{
  operation: string;
  options: Required<IdempotentOutcomeOptions>;
}>({ key: 'idempotency:outcome' });

/** The default and the bound of `maxWaitSeconds`. */
export const DEFAULT_OUTCOME_WAIT_SECONDS = 10;
const MAX_OUTCOME_WAIT_SECONDS = 60;

/**
 * Makes a `GET` handler the outcome door of a protected operation (docs/outcomes-by-key.md): for the request's
 * `Idempotency-Key`, it answers what that operation stored, as a duplicate would get it (`Idempotent-Replayed: true`);
 * 404 `outcome-not-found` when there is nothing (or the request was released), 409 `in-flight` with `Retry-After` while
 * it runs, and with `Prefer: wait=N` (RFC 7240) it waits up to N seconds (at most `maxWaitSeconds`) for it to finish.
 * The key is scoped as the operation scopes it. The handler itself never runs. `operation` is the operation as the
 * record keys name it: the route (`'POST /orders'`) or its `name`; checked at startup.
 *
 * @example
 * ```ts
 * @Get('outcome')
 * @IdempotentOutcome('POST /orders')
 * orderOutcome() {}
 * ```
 */
export function IdempotentOutcome(operation: string, options: IdempotentOutcomeOptions = {}): MethodDecorator {
  if (typeof operation !== 'string' || operation.length === 0) {
    throw new TypeError(
      `@IdempotentOutcome() needs the operation it answers for ('POST /orders', or the route's name), got ${JSON.stringify(operation)}`,
    );
  }
  const { private: isPrivate = true, maxWaitSeconds = DEFAULT_OUTCOME_WAIT_SECONDS } = options ?? {};
  if (typeof isPrivate !== 'boolean') {
    throw new TypeError(`@IdempotentOutcome(${operation}): private must be true or false, got ${String(isPrivate)}`);
  }
  if (!Number.isInteger(maxWaitSeconds) || maxWaitSeconds < 0 || maxWaitSeconds > MAX_OUTCOME_WAIT_SECONDS) {
    throw new TypeError(
      `@IdempotentOutcome(${operation}): maxWaitSeconds must be a whole number of seconds from 0 to ${MAX_OUTCOME_WAIT_SECONDS}, got ${String(maxWaitSeconds)}`,
    );
  }
  return applyDecorators(
    IdempotentOutcomeRoute({ operation, options: { private: isPrivate, maxWaitSeconds } }),
    UseInterceptors(OutcomeDoorInterceptor),
    UseFilters(IdempotencyExceptionFilter),
  );
}

/** The `@IdempotentOutcome()` of a handler, if it has one. */
export function readDoor(handler: Function) {
  return Reflect.getMetadata(IdempotentOutcomeRoute.KEY, handler) as
    { operation: string; options: { private: boolean; maxWaitSeconds: number } } | undefined;
}
