import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotencyClock } from '../idempotency.clock';
import { runStep, StepBackoff, StepFunction, StepInfo, StepRetry } from './step-runner';

/**
 * The attempts of one step within a run (`IdempotencyContext.step`'s `retry` and `timeoutMs`): each attempt is given an
 * `AbortSignal` that fires at its time limit or when the run may have lost the lease; an error the caller marks
 * retryable is tried again with the same step key, after a backoff, unless the wait and the next attempt's time limit
 * would outlive the lease.
 */

/** An attempt of a step that ran past its `timeoutMs`: the attempt's signal fired with it, and the step stopped waiting. */
export class StepTimeoutError extends Error {
  override readonly name = 'StepTimeoutError';
  constructor(
    readonly step: string,
    readonly timeoutMs: number,
  ) {
    super(`IdempotencyContext.step(${JSON.stringify(step)}): the attempt ran past its time limit of ${timeoutMs} ms.`);
  }
}

/** The lease the attempts run under, as the journal sees it. */
export interface AttemptLease {
  /** Whether the run may have lost it (a write was refused, or its end less the skew margin passed). */
  gone(): boolean;
  /** Its end less the skew margin, in ms by the module's clock. */
  usableUntilMs(): number;
  /** The error a step answers once it is gone. */
  lost(): Error;
}

export interface StepAttempts {
  name: string;
  key: string;
  /** The first attempt's number. */
  first: number;
  retry?: StepRetry;
  timeoutMs?: number;
  lease: AttemptLease;
  clock: IdempotencyClock;
  /** Before each retry (an at-most-once step records its start here). */
  beforeRetry(attempt: number): Promise<void>;
}

/** How often a signal's lease is checked at most (a refused renewal is seen within this). */
const LEASE_CHECK_MS = 1000;

/** Runs `fn` until an attempt returns, within `retry` and the lease: its value and the attempt that returned it. */
export async function runAttempts<T>(fn: StepFunction<T>, run: StepAttempts): Promise<{ value: T; attempt: number }> {
  const last = run.first + (run.retry?.attempts ?? 1) - 1;
  for (let attempt = run.first; ; attempt++) {
    try {
      return { value: await runAttempt(fn, run, attempt), attempt };
    } catch (error) {
      const { retry } = run;
      if (!retry || attempt >= last || !retryable(retry, error)) throw error;
      if (run.lease.gone()) throw run.lease.lost();
      const delayMs = backoffMs(retry.backoff, attempt - run.first + 1);
      // A retry that could not finish before the lease ends is not started: the error stands.
      if (run.clock.nowMs() + delayMs + (run.timeoutMs ?? 0) > run.lease.usableUntilMs()) throw error;
      if (delayMs > 0) await sleep(delayMs); // no backoff: the next attempt at once, without a timer
      if (run.lease.gone()) throw run.lease.lost();
      await run.beforeRetry(attempt + 1);
    }
  }
}

/**
 * One attempt of `fn` (or a probe) with its `signal`: made when `fn` first reads it, it fires at the time limit or once
 * the lease is gone (checked every second, and at its end). Past the time limit the attempt rejects with
 * `StepTimeoutError`, whatever `fn` does.
 */
export function runAttempt<T>(
  fn: (step: StepInfo) => T | Promise<T>,
  run: Pick<StepAttempts, 'name' | 'key' | 'timeoutMs' | 'lease' | 'clock'>,
  attempt: number,
): Promise<T> {
  let controller: AbortController | undefined;
  let watch: NodeJS.Timeout | undefined;
  let limit: NodeJS.Timeout | undefined;
  const control = () => (controller ??= watchLease());
  const watchLease = () => {
    const made = new AbortController();
    const check = () => {
      if (run.lease.gone()) made.abort(run.lease.lost());
      else
        watch = setTimeout(
          check,
          Math.min(LEASE_CHECK_MS, Math.max(50, run.lease.usableUntilMs() - run.clock.nowMs())),
        ).unref();
    };
    check();
    return made;
  };
  const info = { key: run.key, attempt } as StepInfo;
  Object.defineProperty(info, 'signal', { get: () => control().signal, enumerable: false });
  const running = Promise.resolve().then(() => runStep(fn, info));
  const { timeoutMs } = run;
  const settled =
    timeoutMs === undefined
      ? running
      : Promise.race([
          running,
          new Promise<never>((_, reject) => {
            limit = setTimeout(() => {
              const error = new StepTimeoutError(run.name, timeoutMs);
              controller?.abort(error);
              reject(error);
            }, timeoutMs);
          }),
        ]);
  running.catch(() => undefined); // an attempt past its limit may still fail: nobody waits for it
  return settled.finally(() => {
    clearTimeout(watch);
    clearTimeout(limit);
  });
}

function retryable(retry: StepRetry, error: unknown): boolean {
  try {
    return retry.retryable(error) === true;
  } catch {
    return false; // a predicate that throws retries nothing: the step's own error stands
  }
}

function backoffMs({ initialMs = 100, factor = 2, maxMs = 5000 }: StepBackoff = {}, retry: number): number {
  return Math.min(maxMs, initialMs * factor ** (retry - 1));
}
