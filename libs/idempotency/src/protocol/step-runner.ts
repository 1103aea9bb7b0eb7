import { AsyncLocalStorage } from 'node:async_hooks';
import { STEP_KEY_HOOK } from '../client/derived-key';
import { MAX_STEP_NAME_LENGTH } from '../idempotency.constants';

/**
 * What every way of running steps shares (`IdempotencyContext.step`): the function's arguments, the check of a step's
 * name, the step's key for the retrying client, and the runner of steps that are not recorded. The recorded ones are
 * `StepJournal`'s (step-journal.ts).
 */

/** The key of the step running here, and whether a call took it: the retrying client's default key (`stepKey`). */
const stepKeys = new AsyncLocalStorage<{ key: string; taken: boolean }>();
(globalThis as Record<symbol, unknown>)[STEP_KEY_HOOK] = (): string | undefined => {
  const step = stepKeys.getStore();
  if (step === undefined) return undefined;
  // One key, one logical call: a second call sent with it would be answered with the first one's result.
  if (step.taken) {
    throw new Error(
      "IdempotentClient: an earlier call in this step took the step's key; one key serves one logical call. Give each " +
        'call in a step its own { name } (its key is then deriveKey(name)) or { key }.',
    );
  }
  step.taken = true;
  return step.key;
};

/** What a step's function is given: the key for its downstream call, and how many times it has been started. */
export interface StepInfo {
  /** `deriveKey(name)`: the same for this request and step name in every run, process and owner. */
  key: string;
  /** 1 the first time; more after a run stopped inside it (or, at most, since the last step was recorded). */
  attempt: number;
  /**
   * Fires when this attempt should stop: at its time limit (`timeoutMs`, with a `StepTimeoutError`), or once the run
   * may have lost the lease (with `IdempotencyLeaseLostError`): pass it to the downstream call. Made when first read.
   */
  readonly signal: AbortSignal;
}

export type StepFunction<T> = (step: StepInfo) => T | Promise<T>;

/** What a probe returns when it cannot tell whether an at-most-once step's effect happened. */
export const OUTCOME_UNKNOWN: unique symbol = Symbol.for('nestjs-dynamodb-idempotency.outcome-unknown');

/**
 * Asks the other system whether an interrupted at-most-once step's effect happened (`attempt` is the attempt that
 * was interrupted, `key` the one its call carried): its result if it did (recorded as the step's result), `undefined` if
 * it did not (the function runs again), `OUTCOME_UNKNOWN` if it cannot tell.
 */
export type StepProbe<T> = (
  step: StepInfo,
) => T | undefined | typeof OUTCOME_UNKNOWN | Promise<T | undefined | typeof OUTCOME_UNKNOWN>;

/** How long to wait before each retry: `initialMs`, times `factor` after each, at most `maxMs`. */
export interface StepBackoff {
  /** Default 100. */
  initialMs?: number;
  /** Default 2. */
  factor?: number;
  /** Default 5000. */
  maxMs?: number;
}

/** Retries of a step within the run (`StepOptions.retry`). */
export interface StepRetry {
  /** Attempts in this run, the first included: 1 to 100. */
  attempts: number;
  /** Whether an error is worth another attempt (a timeout, a 503 from the provider); any other error ends the step. */
  retryable: (error: unknown) => boolean;
  backoff?: StepBackoff;
}

/** How a step runs (`IdempotencyContext.step`'s third argument). */
export interface StepOptions<T> {
  /**
   * `'at-least-once'` (the default): a run that stopped inside the function runs it again on the next run.
   * `'at-most-once'`: its start is recorded before the function runs (one more write), and a later run that finds it
   * started without a result asks `probe`, or fails with `StepOutcomeUnknownError`.
   */
  semantics?: 'at-least-once' | 'at-most-once';
  /** For `'at-most-once'`: how a later run learns whether an interrupted attempt had its effect. */
  probe?: StepProbe<T>;
  /** Attempts within the run for errors `retryable` accepts, with the same step key; none by default. */
  retry?: StepRetry;
  /** Each attempt's time limit, in ms: its `signal` fires and the attempt fails with `StepTimeoutError`. */
  timeoutMs?: number;
}

/** How a call runs its steps: recorded on its record (`StepJournal`), or not at all (`UnrecordedSteps`). */
export interface StepRunner {
  step<T>(name: string, fn: StepFunction<T>, options?: StepOptions<T>): Promise<T>;
  /** The call's work has returned: a step started from now on (by work it left running) is refused before it runs. */
  end?(): void;
}

/** Runs a step's function with its key as the one the retrying client defaults to inside it. */
export function runStep<T>(fn: StepFunction<T>, info: StepInfo): T | Promise<T> {
  return stepKeys.run({ key: info.key, taken: false }, fn, info);
}

/** A lone surrogate: text no store can keep as it is (DynamoDB refuses it, or keeps a table it cannot scan). */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * A step's name as the API accepts it: 1 to 255 characters of well-formed Unicode. Every such name round-trips
 * through every store (`__proto__` and `constructor` included). The one check, shared with the simulation.
 */
export function checkStepName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_STEP_NAME_LENGTH) {
    throw new TypeError(`IdempotencyContext.step needs a name of 1 to ${MAX_STEP_NAME_LENGTH} characters.`);
  }
  if (LONE_SURROGATE.test(name)) {
    throw new TypeError(
      `IdempotencyContext.step(${JSON.stringify(name)}): the name is not well-formed Unicode (a lone surrogate).`,
    );
  }
}

/** A step's options as the API accepts them: each checked where it is given (a `TypeError` naming it). */
export function checkStepOptions(name: string, options: unknown): asserts options is StepOptions<unknown> | undefined {
  if (options === undefined) return;
  const step = `IdempotencyContext.step(${JSON.stringify(name)})`;
  if (typeof options !== 'object' || options === null) throw new TypeError(`${step}: options must be an object.`);
  const { semantics, probe } = options as StepOptions<unknown>;
  if (semantics !== undefined && semantics !== 'at-least-once' && semantics !== 'at-most-once') {
    throw new TypeError(`${step}: semantics is 'at-least-once' or 'at-most-once', not ${String(semantics)}.`);
  }
  if (probe !== undefined && typeof probe !== 'function') throw new TypeError(`${step}: probe must be a function.`);
  if (probe !== undefined && semantics !== 'at-most-once') {
    throw new TypeError(`${step}: a probe is only asked for an at-most-once step (semantics: 'at-most-once').`);
  }
  const { retry, timeoutMs } = options as StepOptions<unknown>;
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS)) {
    throw new TypeError(
      `${step}: timeoutMs is a whole number of ms from 1 to ${MAX_TIMER_MS}, not ${String(timeoutMs)}.`,
    );
  }
  if (retry !== undefined) checkRetry(step, retry);
}

/** The longest a timer can wait (Node's setTimeout: 2^31 - 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

function checkRetry(step: string, retry: StepRetry): void {
  if (typeof retry !== 'object' || retry === null) throw new TypeError(`${step}: retry must be an object.`);
  const { attempts, retryable, backoff = {} } = retry;
  if (!(Number.isInteger(attempts) && attempts >= 1 && attempts <= 100)) {
    throw new TypeError(`${step}: retry.attempts is a whole number from 1 to 100, not ${String(attempts)}.`);
  }
  if (typeof retryable !== 'function') {
    throw new TypeError(`${step}: retry.retryable must be a function (which errors are worth another attempt).`);
  }
  const { initialMs = 100, factor = 2, maxMs = 5000 } = backoff;
  for (const [name, value, least] of [
    ['initialMs', initialMs, 0],
    ['factor', factor, 1],
    ['maxMs', maxMs, 0],
  ] as const) {
    if (!(typeof value === 'number' && Number.isFinite(value) && value >= least && value <= MAX_TIMER_MS)) {
      throw new TypeError(
        `${step}: retry.backoff.${name} is a number from ${least} to ${MAX_TIMER_MS}, not ${String(value)}.`,
      );
    }
  }
}

/** A step's name, checked and taken for this run: once per run. */
export function uniqueName(names: Set<string>, name: string): void {
  checkStepName(name);
  if (names.has(name)) {
    throw new Error(
      `IdempotencyContext.step(${JSON.stringify(name)}): a step of that name already ran in this call; step names are unique within a call.`,
    );
  }
  names.add(name);
}
