import { omittedInWords, OmittedReason } from '../repository/idempotency.record';
import type { ProblemOutcome } from './outcomes';

/**
 * Every outcome that stops a call from running or from getting a replay, as a typed error. Each context answers it as
 * its outcome's problem (`PROBLEMS`); programmatic and message-handler callers catch them by class.
 */
export abstract class IdempotencyError extends Error {
  /** The outcome this error answers and is counted under in `idempotency_requests_total`. */
  abstract readonly outcome: ProblemOutcome;
  /**
   * Set when the error came after the call's own work had started doing things (a step had run): the request may have
   * been partly processed, and the problem says so instead of "not processed".
   */
  workStarted = false;
  /** Members the problem body carries besides type, title, status and detail. */
  problemExtensions(): Record<string, unknown> {
    return {};
  }
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
  readonly outcome: ProblemOutcome = 'in_flight';
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
    /** `Put on orders`, `Update on stock`, …: for the log, never the client (it names the application's table). */
    readonly write: string,
  ) {
    super(
      `Write ${writeIndex} given to commitWith failed its condition; nothing was written. The request was not ` +
        'applied; the same key may be retried.',
    );
  }

  override problemExtensions(): Record<string, unknown> {
    return { writeIndex: this.writeIndex };
  }
}

/** The key was used and completed, but its result could not be stored (`omittedBecause` says why): no replay. */
export class IdempotencyResultNotStoredError extends IdempotencyError {
  override readonly name = 'IdempotencyResultNotStoredError';
  readonly outcome = 'response_not_stored';
  constructor(
    readonly statusCode: number,
    readonly omittedBecause?: OmittedReason,
  ) {
    super(
      'A request with this idempotency key was processed, but its response was not stored for replay: ' +
        `${omittedInWords(omittedBecause)}. It will not be processed again.`,
    );
  }

  override problemExtensions(): Record<string, unknown> {
    return { originalStatus: this.statusCode };
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
 * The key's last owners crashed on it (`maxCrashedOwners`, their hosts and processes in `owners`, oldest first): the
 * handler is not run again for it. Stored as the key's final failure: every duplicate gets it until the record expires
 * or an operator releases the key (`keys:release`) after a fix.
 */
export class IdempotencyKeyPoisonedError extends IdempotencyError {
  override readonly name = 'IdempotencyKeyPoisonedError';
  readonly outcome = 'key_poisoned';
  constructor(readonly owners: readonly string[]) {
    super(
      `The handler was not run: the last ${owners.length} owner(s) of this idempotency key crashed while running it ` +
        `(${owners.map((owner) => owner || 'a process that did not say').join(', ')}). ` +
        'An operator must fix the cause and release the key.',
    );
  }

  override problemExtensions(): Record<string, unknown> {
    return { crashedOwners: this.owners.length, owners: this.owners };
  }
}

/**
 * An outcome asked by its key alone (`@IdempotentOutcome()`) that is not there: no record for this caller's key (never
 * received, purged, past its retention), or one that was released (it failed, or its owner died): sending the request
 * again runs it.
 */
export class IdempotencyOutcomeNotFoundError extends IdempotencyError {
  override readonly name = 'IdempotencyOutcomeNotFoundError';
  readonly outcome = 'outcome_not_found';
  constructor(readonly state: 'unknown' | 'released') {
    super(
      state === 'released'
        ? 'The request with this idempotency key did not complete (it failed, or its server stopped) and nothing runs it now: send it again with the same key.'
        : 'No request with this idempotency key is known to this operation for this caller (never received, or past its retention).',
    );
  }

  override problemExtensions(): Record<string, unknown> {
    return { state: this.state };
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
 * The route's `fingerprint` function threw or returned a value that is not JSON: what makes two requests the same is
 * unknown, so nothing is claimed and the handler does not run.
 */
export class IdempotencyFingerprintFailedError extends IdempotencyError {
  override readonly name = 'IdempotencyFingerprintFailedError';
  readonly outcome = 'fingerprint_failed';
  constructor(readonly operation: string) {
    super(`The idempotency fingerprint of ${operation} could not be taken (the fingerprint function failed).`);
  }
}

/**
 * A protected call made from inside a call that holds its record key (a method that calls itself, or calls back into
 * a call it runs inside, with the same key): it would wait on its own claim for ever, so it is refused at once. Found
 * through the running claim (`AsyncLocalStorage`): always for provider methods, and for `execute()` whenever calls are
 * tracked (by default).
 */
export class IdempotencyReentrantCallError extends IdempotencyError {
  override readonly name = 'IdempotencyReentrantCallError';
  readonly outcome = 'reentrant_call';
  constructor(readonly operation: string) {
    super(
      `${operation} was called again with the key it holds, from inside its own call: it would wait on itself for ` +
        'ever, so this inner call was not run. Call the work itself (a method without @Idempotent()) from inside, ' +
        'or give the inner call a key of its own.',
    );
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
    options?: ErrorOptions & { reasons?: readonly string[] },
  ) {
    const reasons = options?.reasons?.length ? `: ${options.reasons.join(', ')}` : '';
    super(`Idempotency store throttled the ${operation} (${dynamoErrorCode}${reasons})`, options);
    this.reasons = options?.reasons ?? [];
  }

  /** What DynamoDB said it throttled (its `ThrottlingReasons`: a reason and the table's or an index's ARN). */
  readonly reasons: readonly string[];
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
