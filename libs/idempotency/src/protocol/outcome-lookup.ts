import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@nestjs/common';
import { StepOutcomeUnknownError } from '../errors/step-errors';
import { IdempotencyClock } from '../idempotency.clock';
import { IdempotencyRecord, isFinalFailure, StoredResponse } from '../repository/idempotency.record';
import { IdempotencyRepository, RecordLocation } from '../repository/idempotency.repository';
import { ResponseSealer } from '../response/response-sealing';
import { clockSkewFor } from '../options/option-checks';
import { ResolvedIdempotencyOptions } from '../options/resolved-options';
import { checkExecuteOptions, functionRecord } from './function-work';
import type { ExecuteOptions } from './protected-call';
import { replayedBody } from '../response/stored-response.codec';
import { completedResponse } from './completed-response';
import { finalFailureError } from './poisoned-keys';
import { retryAfterSeconds } from './protected-call';

/**
 * What a key's operation stored, asked by the key alone (`IdempotencyService.outcome`, `@IdempotentOutcome()`): for a
 * client that lost the answer and no longer has the request (a job runner that restarted, an app that keeps only the
 * key, a body that was a stream).
 *
 * - `completed`: the stored answer, as a replay gives it (`response`; `value`, the result a function's replay returns).
 *   A stored answer that could not be kept or opened throws as a duplicate's replay would (409 response-not-stored,
 *   500 record-unreadable).
 * - `in-flight`: an owner holds the key; ask again after `retryAfterSeconds`.
 * - `released`: it ran and failed (not finally), or its owner died and nobody took it over: sending the request again
 *   runs it.
 * - `poisoned`: its owners crashed on it (`maxCrashedOwners`): the owners.
 * - `step-outcome-unknown`: an at-most-once step was interrupted and nothing could tell whether it had its effect: the
 *   step and the attempt. An operator settles it (`keys:resolve-step`).
 * - `unknown`: no record (never received, purged, or past its retention).
 */
export type KeyOutcome =
  | { state: 'completed'; response: StoredResponse; value: unknown; completedAt?: number }
  | { state: 'in-flight'; retryAfterSeconds: number }
  | { state: 'released' }
  | { state: 'poisoned'; owners: readonly string[] }
  | { state: 'step-outcome-unknown'; step: string; attempt: number }
  | { state: 'unknown' };

/** The longest an outcome is waited for (`waitMs`): a long poll, not a subscription. */
export const MAX_OUTCOME_WAIT_MS = 60_000;

/** How a record is read again while it is in flight: 25 ms, doubling to 500 ms (a duplicate's `waitMs` reads too). */
export const FIRST_POLL_MS = 25;
export const MAX_POLL_MS = 500;

/** Which call's outcome `IdempotencyService.outcome()` reads: `execute()`'s operation, key and scope. */
export type OutcomeTarget = Pick<ExecuteOptions, 'operation' | 'key' | 'scope' | 'partitionKeyValue'>;

interface OutcomeLookupDependencies {
  repository: IdempotencyRepository;
  clock: IdempotencyClock;
  sealer?: ResponseSealer;
  retryAfterSeconds: number;
  clockSkewSeconds: number;
}

/** Outcomes by key on one store: `IdempotencyService.outcome()`'s, and the `@IdempotentOutcome()` door's. */
export class OutcomeLookup {
  private readonly dependencies: OutcomeLookupDependencies;

  constructor(
    repository: IdempotencyRepository,
    clock: IdempotencyClock,
    private readonly options: ResolvedIdempotencyOptions,
  ) {
    const { sealer, retryAfterSeconds, pendingTtlSeconds, clockSkewSeconds } = options;
    const skew = clockSkewFor(pendingTtlSeconds, clockSkewSeconds);
    this.dependencies = { repository, clock, sealer, retryAfterSeconds, clockSkewSeconds: skew };
  }

  /** The outcome of an `execute()` call, by its operation, key and scope (each checked, a `TypeError` if bad). */
  ofCall(target: OutcomeTarget, waitMs = 0): Promise<KeyOutcome> {
    checkExecuteOptions({ operation: target?.operation }, this.options);
    return this.at(functionRecord(target, this.options, 'IdempotencyService.outcome'), waitMs);
  }

  /** The outcome of the record at `location`. */
  at(location: RecordLocation, waitMs = 0): Promise<KeyOutcome> {
    return lookUpOutcome(this.dependencies, location, waitMs);
  }
}

const logger = new Logger('Idempotency');

/**
 * The outcome of the record at `location`; with `waitMs`, an in-flight one is read again (25 ms, doubling to 500 ms)
 * until it settles or the wait is over. Each read is one strongly consistent `GetItem`.
 */
async function lookUpOutcome(
  dependencies: OutcomeLookupDependencies,
  location: RecordLocation,
  waitMs = 0,
): Promise<KeyOutcome> {
  if (!(Number.isFinite(waitMs) && waitMs >= 0 && waitMs <= MAX_OUTCOME_WAIT_MS)) {
    throw new TypeError(`waitMs must be a number of milliseconds from 0 to ${MAX_OUTCOME_WAIT_MS}, got ${waitMs}`);
  }
  const until = performance.now() + waitMs;
  for (let pollMs = FIRST_POLL_MS; ; pollMs = Math.min(pollMs * 2, MAX_POLL_MS)) {
    const outcome = outcomeOf(dependencies, await dependencies.repository.get(location));
    const left = until - performance.now();
    if (outcome.state !== 'in-flight' || left <= 0) return outcome;
    await sleep(Math.min(pollMs, left));
  }
}

function outcomeOf(dependencies: OutcomeLookupDependencies, record: IdempotencyRecord | undefined): KeyOutcome {
  const now = dependencies.clock.nowSeconds();
  if (!record) return { state: 'unknown' };
  if (isFinalFailure(record)) {
    const error = finalFailureError(record);
    if (error instanceof StepOutcomeUnknownError) {
      return { state: 'step-outcome-unknown', step: error.step, attempt: error.attempt };
    }
    return { state: 'poisoned', owners: error.owners };
  }
  if (record.status === 'FAILED') return { state: 'released' };
  if (record.status === 'COMPLETED') {
    if (record.expiresAt < now) return { state: 'unknown' }; // past its retention (the table's TTL lags)
    const response = completedResponse(record, dependencies.sealer, logger);
    const value = response.exception === undefined ? replayedBody(response) : undefined;
    return { state: 'completed', response, value, completedAt: record.completedAt };
  }
  const { clockSkewSeconds } = dependencies;
  if (record.expiresAt < now - clockSkewSeconds) return { state: 'released' }; // its owner died; nobody took it over
  const retryAfter = retryAfterSeconds(
    { retryAfterSeconds: dependencies.retryAfterSeconds, clockSkewSeconds },
    record,
    now,
  );
  return { state: 'in-flight', retryAfterSeconds: retryAfter };
}
