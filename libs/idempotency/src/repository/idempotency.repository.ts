import { IdempotencyRecord } from './idempotency.record';
import type { InFlightCost, InFlightInput, ScanInput } from './record-reads';
import {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  CompleteResult,
  FailInput,
  GetInput,
  PutCompletedInput,
  PutCompletedResult,
  RecordStepInput,
  RecordStepResult,
  RemoveInput,
  RemoveResult,
  RenewInput,
  ReviseStepsInput,
  ReviseStepsResult,
  StartStepInput,
  TransitionResult,
} from './store-inputs';

export * from './store-inputs';
export type { InFlightCost, InFlightInput, ScanInput } from './record-reads';

/** The lease of the default `putCompleted`'s claim: how long its record could stay PENDING if the process died. */
const DEFAULT_PUT_COMPLETED_LEASE_SECONDS = 10;

/**
 * Where idempotency records live. An abstract class so that it is its own DI token:
 * inject it without `@Inject()`, replace it with `overrideProvider(IdempotencyRepository)`.
 * Every method takes one input object so fields can be added without breaking implementations.
 *
 * Store faults are thrown as `IdempotencyStoreThrottledError` or `IdempotencyStoreUnavailableError`.
 */
export abstract class IdempotencyRepository {
  /**
   * Claims the key for one caller: succeeds for a new key, an expired record or a FAILED one.
   * First writer wins; every other caller gets the existing record.
   */
  abstract claim(input: ClaimInput): Promise<ClaimResult>;

  /**
   * PENDING → COMPLETED with the response, only while `claimToken` still owns the record; with `writes`, in one
   * transaction with them.
   */
  abstract complete(input: CompleteInput): Promise<CompleteResult>;

  /**
   * Optimistic mode: the COMPLETED record in one write, first writer wins. Stores should do it in one conditional
   * write (DynamoDB: a `PutItem`, or a `TransactWriteItems` with the writes). This default takes two: a claim, then
   * the completion.
   */
  async putCompleted(input: PutCompletedInput): Promise<PutCompletedResult> {
    const { key, partition, response, ttlSeconds, writes } = input;
    const claim = await this.claim({ ...input, leaseSeconds: DEFAULT_PUT_COMPLETED_LEASE_SECONDS });
    if (!claim.claimed) return { ok: false, reason: 'exists', current: claim.existing };
    const { claimToken } = claim;
    const completion = await this.complete({ key, partition, claimToken, response, ttlSeconds, writes });
    if (completion.ok) return completion;
    if (completion.reason === 'commit_rejected') {
      await this.fail({ key, partition, claimToken, ttlSeconds });
      return completion;
    }
    const current = completion.current ?? (await this.get({ key, partition }));
    if (!current) throw new Error(`${this.constructor.name}: the record of ${key} vanished while it was stored`);
    return { ok: false, reason: 'exists', current };
  }

  /** PENDING → FAILED, only while `claimToken` still owns the record. A FAILED key is claimable at once. */
  abstract fail(input: FailInput): Promise<TransitionResult>;

  /** Extends a PENDING record's lease (the owner's heartbeat), only while `claimToken` still owns it. */
  abstract renew(input: RenewInput): Promise<TransitionResult>;

  /**
   * Records a step's result on the PENDING record `claimToken` owns, in one conditional write: `lease_lost` when
   * another claim owns the record now. A claim that resumes the same request later returns it (`ClaimResult.steps`);
   * a claim of a different request, or of an expired completed record, starts without steps. Stores that cannot
   * record steps say so (`IdempotencyContext.step` then fails with this error).
   */
  async recordStep(_input: RecordStepInput): Promise<RecordStepResult> {
    throw new Error(`${this.constructor.name} cannot record steps (IdempotencyContext.step)`);
  }

  /**
   * Records the start of an at-most-once step on the PENDING record `claimToken` owns, before its function runs, in one
   * conditional write (`lease_lost` when another claim owns the record now). A claim that resumes the request returns
   * it (`ClaimResult.startedSteps`) until `recordStep` records the step's result in its place. Stores that cannot
   * record steps say so.
   */
  async startStep(_input: StartStepInput): Promise<RecordStepResult> {
    throw new Error(`${this.constructor.name} cannot record at-most-once steps (IdempotencyContext.step)`);
  }

  /** A strongly consistent read of the record, or undefined if there is none. */
  abstract get(input: GetInput): Promise<IdempotencyRecord | undefined>;

  /**
   * Whether `complete` can commit the work's writes with the completion (DynamoDB transactions). Asked once, at
   * application bootstrap. A store without them answers false, and `commitWith` is refused.
   */
  async supportsCommitWith(): Promise<boolean> {
    return false;
  }

  /**
   * Whether the store deletes expired records itself (DynamoDB's TTL; the in-memory store evicts them). When false (an
   * MRSC global table has no TTL), the reconciler's sweep deletes them. True by default.
   */
  async expiresRecordsItself(): Promise<boolean> {
    return true;
  }

  /**
   * Checked once at application bootstrap: throws an `Error` saying what is wrong and how to fix it when the store
   * cannot be used (no credentials, no table, a table with another key). Nothing to check by default.
   */
  async checkReady(): Promise<void> {}

  /** Every record (or one partition's), a page at a time, without the stored responses: for the reconciler and listings. */
  abstract scan(input: ScanInput): AsyncIterable<IdempotencyRecord[]>;

  /**
   * The PENDING records (the keys in flight), a page at a time, without responses: what a sweep and a PENDING listing
   * read. By default a scan of every record, filtered here; the DynamoDB store reads its sparse index of keys in flight
   * instead when the table has one, so that what it reads grows with the keys in flight, not with the table.
   */
  async *inFlight({ pageSize, leaseEndedBefore }: InFlightInput): AsyncIterable<IdempotencyRecord[]> {
    for await (const page of this.scan({ pageSize })) {
      const inFlight = page.filter(
        ({ status, expiresAt }) =>
          status === 'PENDING' && (leaseEndedBefore === undefined || expiresAt < leaseEndedBefore),
      );
      if (inFlight.length > 0) yield inFlight;
    }
  }

  /** What `inFlight` reads here (the reconciler and `keys:list` say it before they read): a scan, by default. */
  async inFlightCost(): Promise<InFlightCost> {
    return { indexed: false };
  }

  /**
   * Removes a record, conditioned on the claim token and status it was read with: the operator's release of a stuck
   * key or purge of a completed one (`IdempotencyAdmin`). Stores that cannot remove say so.
   */
  async remove(_input: RemoveInput): Promise<RemoveResult> {
    throw new Error(`${this.constructor.name} cannot remove records`);
  }

  /**
   * Makes a final failure (a poisoned key, `isFinalFailure`) claimable again, its steps and owners kept, conditioned on
   * the claim token it was read with: the operator's release of a poisoned key that holds recorded steps (the next
   * request resumes from them; one more owner may try). Stores that cannot say so.
   */
  async reopen(_input: Omit<RemoveInput, 'status'>): Promise<RemoveResult> {
    throw new Error(`${this.constructor.name} cannot reopen records`);
  }

  /**
   * An operator's revision of a request's steps, in one write conditioned on the record as it was read
   * (`ReviseStepsInput`): the step surgery of `keys:restart --from-step` and `keys:resolve-step`. Stores that cannot
   * say so.
   */
  async reviseSteps(_input: ReviseStepsInput): Promise<ReviseStepsResult> {
    throw new Error(`${this.constructor.name} cannot revise steps`);
  }
}
