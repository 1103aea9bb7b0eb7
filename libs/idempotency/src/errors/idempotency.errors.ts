import { HttpException, HttpStatus } from '@nestjs/common';
import { STORE_RETRY_AFTER_SECONDS } from '../idempotency.constants';
import type { RequestOutcome } from '../observability/idempotency.telemetry';

/**
 * Every outcome that stops a call from running or from getting a replay, as a typed error. The HTTP layer maps
 * each to a problem response; programmatic and message-handler callers catch them by class.
 */
export abstract class IdempotencyError extends Error {
  /** The `outcome` label this error is counted under in `idempotency_requests_total`. */
  abstract readonly outcome: RequestOutcome;
}

/** No key on a call that requires one. */
export class IdempotencyKeyMissingError extends IdempotencyError {
  override readonly name = 'IdempotencyKeyMissingError';
  readonly outcome = 'missing_key';
}

/** A key that is empty, too long, has control characters or is a list. */
export class IdempotencyKeyInvalidError extends IdempotencyError {
  override readonly name = 'IdempotencyKeyInvalidError';
  readonly outcome = 'invalid_key';
  constructor(readonly reason: string) {
    super(`Invalid idempotency key: ${reason}.`);
  }
}

/** A request that cannot be fingerprinted safely (nested deeper than the limit). */
export class IdempotencyRequestInvalidError extends IdempotencyError {
  override readonly name = 'IdempotencyRequestInvalidError';
  readonly outcome = 'invalid_request';
}

/** The key was already used for a different request (fingerprint mismatch). */
export class IdempotencyMismatchError extends IdempotencyError {
  override readonly name = 'IdempotencyMismatchError';
  readonly outcome = 'mismatch';
  constructor() {
    super('This idempotency key was already used with a different request.');
  }
}

/** Another call with the key is still running. */
export class IdempotencyInFlightError extends IdempotencyError {
  override readonly name: string = 'IdempotencyInFlightError';
  readonly outcome: RequestOutcome = 'in_flight';
  constructor(readonly retryAfterSeconds: number) {
    super(`A call with this idempotency key is still running; retry in ${retryAfterSeconds} s.`);
  }
}

/**
 * The work finished, but its transaction was cancelled because another caller took the lease over meanwhile: none
 * of its `commitWith` writes happened; the successor's result is the one that counts. A 409 in flight.
 */
export class IdempotencyLeaseLostError extends IdempotencyInFlightError {
  override readonly name = 'IdempotencyLeaseLostError';
  override readonly outcome = 'lease_lost';
}

/**
 * One of the writes given to `commitWith` failed its own condition (the order exists already, the stock ran out):
 * nothing was written and the key is released.
 */
export class IdempotencyCommitRejectedError extends IdempotencyError {
  override readonly name = 'IdempotencyCommitRejectedError';
  readonly outcome = 'commit_rejected';
  constructor(
    /** Its position among the `commitWith` writes, from 0. */
    readonly writeIndex: number,
    /** `Put on orders`, `Update on stock`, … */
    readonly write: string,
  ) {
    super(`Write ${writeIndex} (${write}) given to commitWith failed its condition; nothing was written.`);
  }
}

/** The key was used and completed, but its result was too large to store, so it cannot be replayed. */
export class IdempotencyResultNotStoredError extends IdempotencyError {
  override readonly name = 'IdempotencyResultNotStoredError';
  readonly outcome = 'response_not_stored';
  constructor(readonly statusCode: number) {
    super('The call with this idempotency key completed, but its result was too large to store for replay.');
  }
}

/**
 * The key's call completed, but its stored response cannot be opened (`encryption`: the key that sealed it was
 * removed, or the record was altered or copied from another key). Fails closed: never replayed, never run again.
 */
export class IdempotencyRecordUnreadableError extends IdempotencyError {
  override readonly name = 'IdempotencyRecordUnreadableError';
  readonly outcome = 'record_unreadable';
  constructor(readonly reason: string) {
    super(`The stored response of this idempotency key cannot be read: ${reason}.`);
  }
}

/**
 * The request carries a body that nothing parsed before the fingerprint was taken (no body parser for its content type,
 * or an upload interceptor bound inside `@Idempotent()`): it cannot be told apart from another request, so the handler
 * does not run.
 */
export class IdempotencyBodyUnreadableError extends IdempotencyError {
  override readonly name = 'IdempotencyBodyUnreadableError';
  readonly outcome = 'body_unreadable';
}

/** The application's `scope` function threw: the call's key space is unknown, so the handler does not run. */
export class IdempotencyScopeFailedError extends IdempotencyError {
  override readonly name = 'IdempotencyScopeFailedError';
  readonly outcome = 'scope_failed';
  constructor(readonly operation: string) {
    super(`The idempotency scope of ${operation} could not be determined (the scope function threw).`);
  }
}

/**
 * The store refused the module's request in a way retrying will not fix: access denied, no such table, a request it
 * rejects as invalid, unrecognized credentials. Fails closed with a 500, without `Retry-After`.
 */
export class IdempotencyStoreMisconfiguredError extends IdempotencyError {
  override readonly name = 'IdempotencyStoreMisconfiguredError';
  readonly outcome = 'store_misconfigured';
  constructor(
    readonly operation: string,
    readonly dynamoErrorCode: string,
    options?: ErrorOptions,
  ) {
    super(`Idempotency store refused the ${operation} (${dynamoErrorCode})`, options);
  }
}

/** DynamoDB answered with throttling even after the SDK's own retries. Never a duplicate. */
export class IdempotencyStoreThrottledError extends IdempotencyError {
  override readonly name = 'IdempotencyStoreThrottledError';
  readonly outcome = 'store_throttled';
  constructor(
    readonly operation: string,
    /** The DynamoDB error name, e.g. `ProvisionedThroughputExceededException`. */
    readonly dynamoErrorCode: string,
    options?: ErrorOptions,
  ) {
    super(`Idempotency store throttled the ${operation} (${dynamoErrorCode})`, options);
  }
}

/** The store could not answer: timeout, socket error, 5xx. Fail closed. */
export class IdempotencyStoreUnavailableError extends IdempotencyError {
  override readonly name = 'IdempotencyStoreUnavailableError';
  readonly outcome = 'store_unavailable';
  constructor(
    readonly operation: string,
    readonly dynamoErrorCode: string,
    options?: ErrorOptions,
  ) {
    super(`Idempotency store unavailable for the ${operation} (${dynamoErrorCode})`, options);
  }
}

/** The stable problem types (RFC 9457 `type`), one per outcome. */
export const ProblemType = {
  keyMissing: 'urn:nestjs-dynamodb-idempotency:key-missing',
  keyInvalid: 'urn:nestjs-dynamodb-idempotency:key-invalid',
  requestInvalid: 'urn:nestjs-dynamodb-idempotency:request-invalid',
  fingerprintMismatch: 'urn:nestjs-dynamodb-idempotency:fingerprint-mismatch',
  inFlight: 'urn:nestjs-dynamodb-idempotency:in-flight',
  commitRejected: 'urn:nestjs-dynamodb-idempotency:commit-rejected',
  responseNotStored: 'urn:nestjs-dynamodb-idempotency:response-not-stored',
  recordUnreadable: 'urn:nestjs-dynamodb-idempotency:record-unreadable',
  bodyUnreadable: 'urn:nestjs-dynamodb-idempotency:body-unreadable',
  scopeFailed: 'urn:nestjs-dynamodb-idempotency:scope-failed',
  storeMisconfigured: 'urn:nestjs-dynamodb-idempotency:store-misconfigured',
  storeThrottled: 'urn:nestjs-dynamodb-idempotency:store-throttled',
  storeUnavailable: 'urn:nestjs-dynamodb-idempotency:store-unavailable',
} as const;

export type ProblemTypeUri = (typeof ProblemType)[keyof typeof ProblemType];

/** An RFC 9457 problem details body. */
export interface ProblemDetails {
  type: ProblemTypeUri;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

/**
 * An `IdempotencyError` as HTTP: `IdempotencyExceptionFilter` sends it as `application/problem+json` with its
 * headers (`Retry-After`); `getResponse()` is the problem body and the typed error is the `cause`.
 */
export class IdempotencyProblemException extends HttpException {
  constructor(
    readonly problem: ProblemDetails,
    readonly headers: Record<string, string> = {},
    options?: { cause?: unknown },
  ) {
    super(problem, problem.status, options);
  }

  static from(error: IdempotencyError): IdempotencyProblemException {
    const problem = (type: ProblemTypeUri, title: string, status: number, detail: string, extra = {}) =>
      ({ type, title, status, detail, ...extra }) satisfies ProblemDetails;
    const retryAfter = (seconds: number) => ({ 'Retry-After': String(seconds) });
    const cause = { cause: error };
    if (error instanceof IdempotencyKeyMissingError) {
      return new IdempotencyProblemException(problem(ProblemType.keyMissing, 'Idempotency key missing', 400, error.message), {}, cause);
    }
    if (error instanceof IdempotencyKeyInvalidError) {
      return new IdempotencyProblemException(problem(ProblemType.keyInvalid, 'Idempotency key invalid', 400, error.message), {}, cause);
    }
    if (error instanceof IdempotencyRequestInvalidError) {
      const title = 'Request cannot be fingerprinted';
      return new IdempotencyProblemException(problem(ProblemType.requestInvalid, title, 400, error.message), {}, cause);
    }
    if (error instanceof IdempotencyMismatchError) {
      const detail = `${error.message} Use a new key for a new request.`;
      const title = 'Idempotency key reused with a different request';
      return new IdempotencyProblemException(problem(ProblemType.fingerprintMismatch, title, 422, detail), {}, cause);
    }
    if (error instanceof IdempotencyInFlightError) {
      const detail = 'A request with this idempotency key is still being processed. Retry after the indicated delay.';
      return new IdempotencyProblemException(
        problem(ProblemType.inFlight, 'Request in progress', HttpStatus.CONFLICT, detail),
        retryAfter(error.retryAfterSeconds),
        cause,
      );
    }
    if (error instanceof IdempotencyCommitRejectedError) {
      const detail = `${error.message} The request was not applied; the same key may be retried.`;
      return new IdempotencyProblemException(
        problem(ProblemType.commitRejected, 'Request rejected by a write condition', HttpStatus.CONFLICT, detail, {
          writeIndex: error.writeIndex,
          write: error.write,
        }),
        {},
        cause,
      );
    }
    if (error instanceof IdempotencyResultNotStoredError) {
      const detail =
        'A request with this idempotency key was processed, but its response was too large to store for replay. ' +
        'It will not be processed again.';
      return new IdempotencyProblemException(
        problem(ProblemType.responseNotStored, 'Request already processed', HttpStatus.CONFLICT, detail, {
          originalStatus: error.statusCode,
        }),
        {},
        cause,
      );
    }
    if (error instanceof IdempotencyRecordUnreadableError) {
      const detail =
        'A request with this idempotency key was processed, but its stored response cannot be read. ' +
        'It will not be processed again.';
      return new IdempotencyProblemException(problem(ProblemType.recordUnreadable, 'Stored response unreadable', 500, detail), {}, cause);
    }
    if (error instanceof IdempotencyBodyUnreadableError) {
      return new IdempotencyProblemException(problem(ProblemType.bodyUnreadable, 'Request body not readable', 500, error.message), {}, cause);
    }
    if (error instanceof IdempotencyScopeFailedError) {
      return new IdempotencyProblemException(problem(ProblemType.scopeFailed, 'Idempotency scope failed', 500, error.message), {}, cause);
    }
    if (error instanceof IdempotencyStoreMisconfiguredError) {
      const detail = 'The request was not processed because the idempotency store refused it in a way retrying will not fix. The operator has been told (logs).';
      return new IdempotencyProblemException(problem(ProblemType.storeMisconfigured, 'Idempotency store misconfigured', 500, detail), {}, cause);
    }
    const throttled = error instanceof IdempotencyStoreThrottledError;
    const detail = `The request was not processed because the idempotency store is ${throttled ? 'throttling' : 'unavailable'}. Retry with the same key.`;
    return new IdempotencyProblemException(
      throttled
        ? problem(ProblemType.storeThrottled, 'Idempotency store throttled', 503, detail)
        : problem(ProblemType.storeUnavailable, 'Idempotency store unavailable', 503, detail),
      retryAfter(STORE_RETRY_AFTER_SECONDS),
      cause,
    );
  }
}
