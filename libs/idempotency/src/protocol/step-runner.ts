import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { STEP_KEY_HOOK } from '../client/derived-key';
import { MAX_STEP_NAME_LENGTH } from '../idempotency.constants';
import { DerivingRequest, derivedKeyOf } from '../keys/derived-key';

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
}

export type StepFunction<T> = (step: StepInfo) => T | Promise<T>;

/** How a call runs its steps: recorded on its record (`StepJournal`), or not at all (`UnrecordedSteps`). */
export interface StepRunner {
  step<T>(name: string, fn: StepFunction<T>): Promise<T>;
  /** The call's work has returned: a step started from now on (by work it left running) is refused before it runs. */
  end?(): void;
}

/** Runs a step's function with its key as the one the retrying client defaults to inside it. */
export function runStep<T>(fn: StepFunction<T>, info: StepInfo): T | Promise<T> {
  return stepKeys.run({ key: info.key, taken: false }, fn, info);
}

/**
 * Steps where nothing can be recorded: optimistic mode (no claim; warned once per route) and calls without a key. The
 * function runs every time, with the key it would have had (a random one without a record key).
 */
export class UnrecordedSteps implements StepRunner {
  private static readonly warned = new Set<string>();
  private readonly names = new Set<string>();

  constructor(
    private readonly request?: DerivingRequest,
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
    const key = this.request === undefined ? randomBytes(32).toString('hex') : derivedKeyOf(this.request, name);
    return runStep(fn, { key, attempt: 1 });
  }
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
