import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { STEP_KEY_HOOK } from '../client/derived-key';
import { MAX_STEP_NAME_LENGTH } from '../idempotency.constants';
import { derivedKeyOf } from '../keys/derived-key';

/**
 * What every way of running steps shares (`IdempotencyContext.step`): the function's arguments, the check of a step's
 * name, the step's key for the retrying client, and the runner of steps that are not recorded. The recorded ones are
 * `StepJournal`'s (step-journal.ts).
 */

/** The key of the step running here, for the retrying client's default key (`stepKey`). */
const stepKeys = new AsyncLocalStorage<string>();
(globalThis as Record<symbol, unknown>)[STEP_KEY_HOOK] = (): string | undefined => stepKeys.getStore();

/** What a step's function is given: the key for its downstream call, and how many times it has been started. */
export interface StepInfo {
  /** `deriveKey(name)`: the same for this request and step name in every run, process and owner. */
  key: string;
  /** 1 the first time; more after a run stopped inside it (or, at most, since the last step was recorded). */
  attempt: number;
}

export type StepFunction<T> = (step: StepInfo) => T | Promise<T>;

/** How a call runs its steps: recorded on its record (`StepJournal`), or not at all (`UnrecordedSteps`). */
export interface StepRunner {
  step<T>(name: string, fn: StepFunction<T>): Promise<T>;
}

/** Runs a step's function with its key as the one the retrying client defaults to inside it. */
export function runStep<T>(fn: StepFunction<T>, info: StepInfo): T | Promise<T> {
  return stepKeys.run(info.key, fn, info);
}

/**
 * Steps where nothing can be recorded: optimistic mode (no claim; warned once per route) and calls without a key. The
 * function runs every time, with the key it would have had (a random one without a record key).
 */
export class UnrecordedSteps implements StepRunner {
  private static readonly warned = new Set<string>();
  private readonly names = new Set<string>();

  constructor(
    private readonly recordKey?: string,
    private readonly route?: () => string,
  ) {}

  async step<T>(name: string, fn: StepFunction<T>): Promise<T> {
    uniqueName(this.names, name);
    const route = this.route?.();
    if (route !== undefined && !UnrecordedSteps.warned.has(route)) {
      UnrecordedSteps.warned.add(route);
      new Logger('Idempotency').warn({
        msg: "steps are not recorded in mode 'optimistic' (there is no claim to record them on): each step runs on every attempt",
        route,
      });
    }
    const key = this.recordKey === undefined ? randomBytes(32).toString('hex') : derivedKeyOf(this.recordKey, name);
    return runStep(fn, { key, attempt: 1 });
  }
}

/** A step's name, checked and taken for this run: once per run. */
export function uniqueName(names: Set<string>, name: string): void {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_STEP_NAME_LENGTH) {
    throw new TypeError(`IdempotencyContext.step needs a name of 1 to ${MAX_STEP_NAME_LENGTH} characters.`);
  }
  if (names.has(name)) {
    throw new Error(
      `IdempotencyContext.step(${JSON.stringify(name)}): a step of that name already ran in this call; step names are unique within a call.`,
    );
  }
  names.add(name);
}
