import { Logger } from '@nestjs/common';
import { CommitWrite } from '../repository/commit-write';
import { omittedInWords, StoredResponse } from '../repository/idempotency.record';
import { omitted } from '../response/stored-response.codec';
import type { UnkeyedCallWatch } from '../unkeyed-calls/unkeyed-call-watch';
import { boundContext, runInClaim, RunningClaim, runningClaim } from './idempotency-context';
import { ProtectedCall, ProtectedWork } from './protected-call';
import type { StepRunner } from './step-runner';

/** A run of the work and its outcome as the store keeps it, in either mode (lease and optimistic). */

/** What a run needs to know when it starts. */
export interface OwnerEnvironment {
  /** Whether the store commits `commitWith` writes with the completion (a promise until the store has answered). */
  canCommitWith(): boolean | Promise<boolean>;
  /**
   * Whether calls are tracked through AsyncLocalStorage: the application injects `IdempotencyContext`, or watches
   * unkeyed side effects.
   */
  tracked(): boolean;
  /** The watch over side effects sent without a key (`unkeyedCalls`), unless it is off. */
  watch?: UnkeyedCallWatch;
}

/** What the work did: its result, or the error it threw. */
export type WorkOutcome<T> = { result: T } | { error: unknown };

/** A run's outcome, and the `commitWith` writes it collected (none when it threw). */
export interface ClaimedRun<T> {
  outcome: WorkOutcome<T>;
  writes: CommitWrite[];
}

/**
 * Runs the work under a claim (`IdempotencyContext`) that collects its `commitWith` writes until it returns. The
 * writes of work that threw are dropped. Written as a promise chain, not an async function: this runs on every new
 * key, and each await that suspends costs the process an allocation of some 400 bytes.
 */
export function runUnderClaim<T>(
  call: ProtectedCall,
  claimToken: string,
  work: ProtectedWork<T>,
  environment: OwnerEnvironment,
  steps: StepRunner,
): Promise<ClaimedRun<T>> {
  const known = environment.canCommitWith();
  if (typeof known === 'boolean') return runClaimed(call, claimToken, work, known, environment, steps);
  // Known once the store has answered; a fault asking it means no (the work runs, without `commitWith`).
  return known.then(
    (canCommitWith) => runClaimed(call, claimToken, work, canCommitWith, environment, steps),
    () => runClaimed(call, claimToken, work, false, environment, steps),
  );
}

/** The run itself, once it is known whether the store commits `commitWith` writes. */
function runClaimed<T>(
  call: ProtectedCall,
  claimToken: string,
  work: ProtectedWork<T>,
  canCommitWith: boolean,
  environment: OwnerEnvironment,
  steps: StepRunner,
): Promise<ClaimedRun<T>> {
  const { watch } = environment;
  const claim: RunningClaim = {
    recordKey: call.recordKey,
    fingerprint: call.fingerprint,
    claimToken,
    canCommitWith,
    writes: [],
    open: true,
    watch,
    route: () => work.origin?.().operation ?? call.recordKey,
    steps,
    parent: runningClaim(),
  };
  const ended = (outcome: WorkOutcome<T>, writes: CommitWrite[]): ClaimedRun<T> => {
    claim.open = false;
    steps.end?.();
    return { outcome, writes };
  };
  let running: Promise<T>;
  try {
    // The same promise when it is one (nearly always): anything else, as `await` would take it.
    running = Promise.resolve(runInClaim(claim, () => work.execute(boundContext(claim)), environment.tracked()));
  } catch (error) {
    return Promise.resolve(ended({ error }, []));
  }
  return running.then(
    (result) => ended({ result }, claim.writes),
    (error: unknown) => ended({ error }, []),
  );
}

/**
 * What to store of an outcome, or undefined to store nothing: a result when final (`storeIf`), and always when it has
 * writes (they are committed with it, so their effects exist); an error when final and capturable.
 */
export function finalOutcome<T>(
  logger: Logger,
  call: ProtectedCall,
  work: ProtectedWork<T>,
  outcome: WorkOutcome<T>,
  writes: CommitWrite[],
): StoredResponse | undefined {
  if ('error' in outcome) {
    const stored = capturedError(logger, call, work, outcome.error);
    return stored && isFinal(logger, call, work, stored, outcome.error) ? stored : undefined;
  }
  const stored = captured(logger, call, work, outcome.result);
  return writes.length > 0 || isFinal(logger, call, work, stored) ? stored : undefined;
}

/** What to store for a result; a result that cannot be stored (or whose capture throws) is recorded without a body. */
function captured<T>(logger: Logger, call: ProtectedCall, work: ProtectedWork<T>, result: T): StoredResponse {
  let stored: StoredResponse;
  try {
    stored = work.capture(result);
  } catch (error) {
    stored = { statusCode: 200, headers: {}, ...omitted('not-json') };
    logger.error({ msg: 'capturing the result failed', key: call.recordKey, error: String(error) });
  }
  if (stored.bodyOmitted) {
    logger.warn({
      msg: `result not stored for replay (${omittedInWords(stored.omittedBecause)}): recorded as done without a body; duplicates get 409 response-not-stored`,
      key: call.recordKey,
    });
  }
  return stored;
}

/**
 * `storeIf`'s verdict. Without one, results are final and errors are not; a `storeIf` that throws is logged and
 * read the same way (a result's work is done; an error's may be retried).
 */
function isFinal<T>(
  logger: Logger,
  call: ProtectedCall,
  work: ProtectedWork<T>,
  stored: StoredResponse,
  error?: unknown,
): boolean {
  const fallback = error === undefined;
  try {
    return work.isFinal?.(stored, error) ?? fallback;
  } catch (storeIfError) {
    logger.error({
      msg: `storeIf threw; the outcome is ${fallback ? 'stored' : 'not stored'}`,
      key: call.recordKey,
      error: String(storeIfError),
    });
    return fallback;
  }
}

/** What to store for a thrown error when it is final; undefined releases the key (also when capturing throws). */
function capturedError<T>(
  logger: Logger,
  call: ProtectedCall,
  work: ProtectedWork<T>,
  error: unknown,
): StoredResponse | undefined {
  try {
    return work.captureError?.(error);
  } catch (captureError) {
    logger.error({
      msg: 'capturing the error failed; the key is released',
      key: call.recordKey,
      error: String(captureError),
    });
    return undefined;
  }
}
