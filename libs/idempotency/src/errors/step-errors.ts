import { IdempotencyError } from './idempotency.errors';

/** The errors of steps that outlive a deploy or a crash: an at-most-once step's unknown outcome, another version's steps. */

/**
 * An at-most-once step (`semantics: 'at-most-once'`) that a run started and did not record: its function may have had
 * its effect, and its probe could not tell (or it has none). Its function is not run again; the key is stored as a
 * final failure that every duplicate gets until an operator settles the step (`keys:resolve-step`). `key` is the step's
 * key (`deriveKey(name)`), the one its downstream call carried; absent when answered from the store.
 */
export class StepOutcomeUnknownError extends IdempotencyError {
  override readonly name = 'StepOutcomeUnknownError';
  readonly outcome = 'step_outcome_unknown';
  constructor(
    readonly step: string,
    readonly attempt: number,
    readonly key?: string,
  ) {
    super(
      `The outcome of step ${JSON.stringify(step)} (attempt ${attempt}) is unknown: it was started and its result was ` +
        'not recorded, and it runs at most once. An operator must settle it.',
    );
  }

  override problemExtensions(): Record<string, unknown> {
    return { step: this.step, attempt: this.attempt };
  }
}

/**
 * A versioned call (`@Idempotent({ version })`, `onVersionChange: 'refuse'`) that would resume steps another version of
 * the code recorded or started (`recordVersion`; undefined: written without a version): it does not run. During a
 * rolling deploy an instance of that version takes the key; a 503 with `Retry-After`, so the client sends it again.
 */
export class IdempotencyVersionMismatchError extends IdempotencyError {
  override readonly name = 'IdempotencyVersionMismatchError';
  readonly outcome = 'version_mismatch';
  constructor(
    readonly recordVersion: string | undefined,
    readonly version: string,
    readonly retryAfterSeconds: number,
  ) {
    super(
      `The request's recorded steps were written by ${recordVersion === undefined ? 'a version without a name' : `version ${JSON.stringify(recordVersion)}`} ` +
        `of this handler, and this is version ${JSON.stringify(version)}: it does not resume them. Retry in ${retryAfterSeconds} s.`,
    );
  }

  override problemExtensions(): Record<string, unknown> {
    return { recordVersion: this.recordVersion ?? null, version: this.version };
  }
}
