import type { CommitWrite } from './commit-write';
import { IdempotencyRecord, IdempotencyStatus, RecordedStep, StartedStep, StoredResponse } from './idempotency.record';

/** What each method of `IdempotencyRepository` takes and answers (./idempotency.repository.ts re-exports them). */

/**
 * Where a record is: its key, and in a table with a sort key the partition it is in (the call's scope). Every input
 * names its record this way; a store with one key per record may ignore `partition`.
 */
export interface RecordLocation {
  /** The record key (scope, operation and client key, hashed): never the raw client key. */
  key: string;
  /** The partition key value in a sort-key layout (`IdempotencyRecord.partition` when read back). */
  partition?: string;
}

export interface ClaimInput extends RecordLocation {
  fingerprint: string;
  /** How long the claim holds before another caller may take over. */
  leaseSeconds: number;
  /**
   * How far another process's clock may run ahead: an existing lease is taken over only once `expires_at` is more than
   * this many seconds in the past. Default 0.
   */
  clockSkewSeconds?: number;
  /**
   * Which process claims (`IdempotencyRecord.holder`): host and pid, or a Lambda request id; never request data.
   * Shown by `keys:inspect`; a store may leave it out.
   */
  holder?: string;
  /**
   * The version of the code that claims (`@Idempotent({ version })`), written on the record. Without it, the record's
   * version is removed and any record is resumed as before.
   */
  version?: string;
  /**
   * With `version`: what a claim that would resume a record of another version holding steps (recorded or started)
   * does. `'refuse'` (the default): it loses, and the record comes back (`claimed: false`) unchanged; `'restart'`: it
   * takes the record over without its steps; `'resume'`: it resumes them.
   */
  onVersionChange?: VersionChange;
}

/** What a run does with a record of another version that holds steps (`onVersionChange`). */
export type VersionChange = 'refuse' | 'resume' | 'restart';

/**
 * A lost race is a value, not an exception: exceptions are for store faults. A won claim that resumes a request
 * (an expired lease or a FAILED attempt with the same fingerprint) hands back the steps that request recorded and the
 * number of this run (`run`, 1 for a first claim); a store without steps leaves both out.
 */
export type ClaimResult =
  | {
      claimed: true;
      claimToken: string;
      run?: number;
      steps?: readonly RecordedStep[];
      /** The at-most-once steps an earlier run of the request started and did not record (`IdempotencyRecord`). */
      startedSteps?: readonly StartedStep[];
      /**
       * When the claim took over a lease (the record was PENDING past its end): the owners since the record's last
       * clean end, oldest first (`IdempotencyRecord.owners`), every one of which crashed. A store that keeps no owners
       * leaves it out.
       */
      takenOver?: readonly string[];
    }
  | { claimed: false; existing: IdempotencyRecord };

/** A recovery point to record: only while `claimToken` owns the PENDING record (`IdempotencyContext.step`). */
export interface RecordStepInput extends RecordLocation {
  claimToken: string;
  step: Omit<RecordedStep, 'bytes' | 'recordedAt'>;
}

/** The start of an at-most-once step, recorded before its function runs: only while `claimToken` owns the record. */
export interface StartStepInput extends RecordLocation {
  claimToken: string;
  step: Omit<StartedStep, 'startedAt'>;
}

/**
 * An operator's revision of a request's steps (`keys:restart --from-step`, `keys:resolve-step`), applied only to the
 * record as it was read: its claim token and status, and a PENDING one only once its lease ended before
 * `leaseEndedBefore` (never a live owner's). The record is released (FAILED, kept `ttlSeconds` for its request, a final
 * failure reopened), the steps in `forget` (recorded or started) are forgotten, and `settle` is recorded in its start's
 * place.
 */
export interface ReviseStepsInput extends RecordLocation {
  claimToken: string;
  status: 'PENDING' | 'FAILED';
  leaseEndedBefore?: number;
  forget: readonly string[];
  settle?: Omit<RecordedStep, 'bytes' | 'recordedAt'>;
  ttlSeconds: number;
}

/** A revision applied, or refused because the record is no longer as it was read (`current`: as it is now). */
export type ReviseStepsResult = { revised: true } | { revised: false; current?: IdempotencyRecord };

export interface CompleteInput extends RecordLocation {
  claimToken: string;
  response: StoredResponse;
  ttlSeconds: number;
  /**
   * The work's own writes, committed in one transaction with the completion (`IdempotencyContext.commitWith`):
   * all or none. Only given when `supportsCommitWith()` is true. A retry passes the same array.
   */
  writes?: readonly CommitWrite[];
  /** Bytes the record's steps take: a store with an item size limit keeps them room (the response is cut first). */
  stepBytes?: number;
}

export interface FailInput extends RecordLocation {
  claimToken: string;
  ttlSeconds: number;
  /**
   * This run started no step it did not record: it is taken off the record's run count (`IdempotencyRecord.runs`), so
   * a step's `attempt` counts only runs that may have started it.
   */
  forgetRun?: boolean;
  /**
   * Only if the lease ended before this (epoch seconds): the reconciler's release of a stuck lease, read from an
   * eventually consistent index or scan. A lease renewed since is its owner's (`lease_running`), never released.
   */
  leaseEndedBefore?: number;
  /**
   * The owner's own release after its work ended (it did not crash): the record's owners (`IdempotencyRecord.owners`)
   * are forgotten, so the next takeover counts no crash before it. A sweep's or an operator's release keeps them.
   */
  endedCleanly?: boolean;
  /**
   * A final failure (a poisoned key): stored with the FAILED record, which is then the answer to every duplicate, not
   * claimable, until `ttlSeconds` have passed or an operator releases it (`reopen`).
   */
  response?: StoredResponse;
}

export interface RenewInput extends RecordLocation {
  claimToken: string;
  /** The lease is extended to now + this many seconds. */
  leaseSeconds: number;
}

export type GetInput = RecordLocation;

/** Removing a record, only in the state it was read in (an operator's release or purge). */
export interface RemoveInput extends RecordLocation {
  /** The claim token read: nothing is removed if another claim owns the record now. */
  claimToken: string;
  /** The status read: nothing is removed if it changed. */
  status: IdempotencyStatus;
}

/** Removed, or not because the record is gone or is no longer as it was read (`current`). */
export type RemoveResult = { removed: true } | { removed: false; current?: IdempotencyRecord };

/**
 * The outcome of a guarded transition (complete, fail or renew). `expiresAt` is the `expires_at` that was written.
 * `already_completed` / `already_failed`: this same claim had already completed or failed the record (for example
 * an SDK retry of a write that landed): benign. `lease_lost`: another claim owns the record now, or it is gone; it
 * was not touched. `lease_running`: a fail with `leaseEndedBefore` met the claim's lease not ended (renewed since).
 */
export type TransitionResult =
  | { ok: true; expiresAt: number }
  | {
      ok: false;
      reason: 'already_completed' | 'already_failed' | 'lease_lost' | 'lease_running';
      current?: IdempotencyRecord;
    };

/** A step recorded, or refused like a transition (`lease_lost`: another claim owns the record now). */
export type RecordStepResult = { ok: true } | (TransitionResult & { ok: false });

/**
 * A completion with writes may also be refused because one of the work's own writes failed its condition
 * (`writeIndex` into `writes`): nothing was written.
 */
export type CompleteResult =
  TransitionResult | { ok: false; reason: 'commit_rejected'; writeIndex: number; current?: undefined };

/**
 * Optimistic mode's one write: a COMPLETED record put where a claim would win (a new key, a FAILED record, an expired
 * one), with the work's `commitWith` writes in the same transaction.
 */
export interface PutCompletedInput extends RecordLocation {
  /** The claim token the record carries (the call's `IdempotencyContext.claimToken`); a fresh one when absent. */
  claimToken?: string;
  fingerprint: string;
  response: StoredResponse;
  ttlSeconds: number;
  /** As for a claim: a lease is replaced only once it is this many seconds past its end. Default 0. */
  clockSkewSeconds?: number;
  /** Only given when `supportsCommitWith()` is true. */
  writes?: readonly CommitWrite[];
}

/**
 * Stored (`expiresAt` is the record's), or not: another call's record is there (`current`, its response included:
 * the winner's outcome to replay), or one of the work's own writes failed its condition and nothing was written.
 */
export type PutCompletedResult =
  | { ok: true; expiresAt: number }
  | { ok: false; reason: 'exists'; current: IdempotencyRecord }
  | { ok: false; reason: 'commit_rejected'; writeIndex: number };

/** Why a guarded write on `claimToken` was refused, from the record as it is now. */
export function refusal(claimToken: string, current: IdempotencyRecord | undefined): TransitionResult & { ok: false } {
  const ours = current?.claimToken === claimToken;
  if (ours && current?.status === 'COMPLETED') return { ok: false, reason: 'already_completed', current };
  if (ours && current?.status === 'FAILED') return { ok: false, reason: 'already_failed', current };
  if (ours && current?.status === 'PENDING') return { ok: false, reason: 'lease_running', current };
  return { ok: false, reason: 'lease_lost', current };
}
