import { Logger } from '@nestjs/common';
import {
  IdempotencyError,
  IdempotencyLeaseLostError,
  IdempotencyRecordUnreadableError,
} from '../errors/idempotency.errors';
import { StepOutcomeUnknownError } from '../errors/step-errors';
import { IdempotencyClock } from '../idempotency.clock';
import { MAX_STEP_RESULT_BYTES, MAX_STEPS_BYTES } from '../idempotency.constants';
import { derivedKeyOf } from '../keys/derived-key';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRecord, RecordedStep, StartedStep, StoredResponse } from '../repository/idempotency.record';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { ResponseSealer, stepSealKey, UnreadableRecordError } from '../response/response-sealing';
import { replayedBody } from '../response/stored-response.codec';
import { stepEntryBytes } from '../response/step-value';
import { encodeTyped } from '../response/typed-value';
import { retryThroughStoreFaults } from './outcome-recorder';
import { ProtectedCall, retryAfterSeconds, StepLedger } from './protected-call';
import { AttemptLease, runAttempt, runAttempts, StepAttempts } from './step-attempts';
import { OUTCOME_UNKNOWN, StepFunction, StepOptions, StepProbe, StepRunner, uniqueName } from './step-runner';

/** The lease a step checks before it starts: its end by this process's clock, and whether a write was refused. */
export interface HeldLease {
  leaseEndsAt: number;
  leaseLost: boolean;
}

/** Where a journal records and what it reads of the module. */
export interface StepJournalDependencies {
  repository: IdempotencyRepository;
  clock: IdempotencyClock;
  telemetry: IdempotencyTelemetry;
  sealer?: ResponseSealer;
}

/** The claim a journal records under: its token, the run it is (1 for the first), and the steps recorded before. */
export interface StepClaim {
  claimToken: string;
  run: number;
  steps: readonly RecordedStep[];
  /** The at-most-once steps an earlier run started and did not record. */
  startedSteps?: readonly StartedStep[];
}

/**
 * The recovery points of one owned run (`IdempotencyContext.step`). A step recorded by an earlier run of the same
 * request is answered from its record without running; any other step runs once its caller is known to hold the lease,
 * and its result is recorded (one conditional write, guarded by the claim token) before it is handed back.
 */
export class StepJournal implements StepRunner {
  private readonly recorded = new Map<string, RecordedStep>();
  private readonly started = new Map<string, StartedStep>();
  private readonly names = new Set<string>();
  /** The run that recorded the latest step (1 if none): a step not recorded may have been started by every run since. */
  private base = 1;
  private readonly ledger: StepLedger = { bytes: 0, unfinished: 0 };
  /** The place of the next step recorded among the request's steps (`RecordedStep.seq`). */
  private seq: number;
  private ended = false;

  constructor(
    private readonly deps: StepJournalDependencies,
    private readonly call: ProtectedCall,
    private readonly claim: StepClaim,
    private readonly lease: HeldLease,
  ) {
    for (const step of claim.steps) {
      this.recorded.set(step.name, step);
      this.base = Math.max(this.base, step.run);
      this.ledger.bytes += step.bytes ?? 0;
    }
    for (const step of claim.startedSteps ?? []) this.started.set(step.name, step);
    this.seq = claim.steps.length;
    call.steps = this.ledger;
  }

  end(): void {
    this.ended = true;
  }

  async step<T>(name: string, fn: StepFunction<T>, options: StepOptions<T> = {}): Promise<T> {
    uniqueName(this.names, name);
    if (this.ended) throw callEnded(name, 'the step was not started');
    const { telemetry } = this.deps;
    const recorded = this.recorded.get(name);
    if (recorded) {
      telemetry.step('resumed');
      return this.opened(recorded) as T;
    }
    if (this.leaseGone()) throw this.lost('a step does not start once its caller may have lost the lease');
    const atMostOnce = options.semantics === 'at-most-once';
    const attempts = this.attempts(name, options, atMostOnce);
    this.ledger.unfinished++;
    const started = atMostOnce ? this.started.get(name) : undefined;
    if (started) {
      const probed = await this.probe(attempts, started.attempt, options.probe);
      if (probed) {
        await this.record(name, started.attempt, probed.value);
        this.ledger.unfinished--;
        return probed.value;
      }
    }
    attempts.first = atMostOnce ? (started?.attempt ?? 0) + 1 : this.claim.run - this.base + 1;
    if (atMostOnce) await this.start(name, attempts.first);
    const { recordKey } = this.call;
    const { value, attempt } = await telemetry.stepSpan(recordKey, name, attempts.first, () =>
      runAttempts(fn, attempts),
    );
    await this.record(name, attempt, value);
    this.ledger.unfinished--;
    telemetry.step('run');
    return value;
  }

  /** How the step's attempts run: its key, retries and time limit, under this run's lease. */
  private attempts<T>(name: string, { retry, timeoutMs }: StepOptions<T>, atMostOnce: boolean): StepAttempts {
    const { clock } = this.deps;
    const lease: AttemptLease = {
      gone: () => this.leaseGone(),
      usableUntilMs: () => (this.lease.leaseEndsAt - this.call.clockSkewSeconds) * 1000,
      lost: () => this.lost('a step attempt stops once its caller may have lost the lease'),
    };
    const beforeRetry = (attempt: number) => (atMostOnce ? this.start(name, attempt) : Promise.resolve());
    return { name, key: derivedKeyOf(this.call, name), first: 1, retry, timeoutMs, lease, clock, beforeRetry };
  }

  /**
   * An at-most-once step found started without a result: its probe's answer (`{ value }`: the effect happened; undefined:
   * it did not, and the function runs again), or `StepOutcomeUnknownError` without a probe or when it cannot tell.
   */
  private async probe<T>(
    attempts: StepAttempts,
    attempt: number,
    probe: StepProbe<T> | undefined,
  ): Promise<{ value: T } | undefined> {
    const { name, key } = attempts;
    const answer = probe ? await runAttempt(probe, attempts, attempt) : OUTCOME_UNKNOWN;
    if (answer === OUTCOME_UNKNOWN) {
      this.deps.telemetry.step('outcome_unknown');
      throw new StepOutcomeUnknownError(name, attempt, key);
    }
    this.deps.telemetry.step(answer === undefined ? 'probed_not_done' : 'probed_done');
    return answer === undefined ? undefined : { value: answer as T };
  }

  /**
   * Records an at-most-once step's start before its function runs, fenced by the claim: a run that lost the key never
   * starts it. Another run of the request that finds the start without a result does not run the function blindly.
   */
  private async start(name: string, attempt: number): Promise<void> {
    const { recordKey: key, partition } = this.call;
    const { claimToken, run } = this.claim;
    const step = { name, attempt, run };
    const written = await retryThroughStoreFaults(() =>
      this.deps.repository.startStep({ key, partition, claimToken, step }),
    );
    if (!written.ok && written.reason === 'lease_lost') {
      this.lease.leaseLost = true;
      throw this.lost('its start was not recorded: another caller holds the key now', written.current);
    }
    if (!written.ok) throw callEnded(name, 'its start was not recorded');
  }

  private async record(name: string, attempt: number, value: unknown): Promise<void> {
    const { repository, sealer } = this.deps;
    const { recordKey: key, partition } = this.call;
    const { claimToken, run } = this.claim;
    const seq = this.seq++;
    const encoded: StoredResponse = {
      statusCode: 200,
      headers: {},
      body: encodeTyped(value, `the result of step(${JSON.stringify(name)})`),
      bodyEncoding: 'typed',
    };
    const result = sealer ? sealer.seal(stepSealKey(key, name), encoded) : encoded;
    const bytes = stepEntryBytes(name, result);
    limitSize(name, bytes, this.ledger.bytes);
    const written = await retryThroughStoreFaults(() =>
      repository.recordStep({ key, partition, claimToken, step: { name, result, attempt, run, seq } }),
    ).catch((error: unknown) => {
      // The step's function has run: whatever the store's fault, the request may have been partly processed.
      if (error instanceof IdempotencyError) error.workStarted = true;
      throw error;
    });
    if (!written.ok && written.reason === 'lease_lost') {
      this.lease.leaseLost = true;
      throw this.lost('its result was not recorded: another caller holds the key now', written.current);
    }
    if (!written.ok) throw callEnded(name, 'its result was not recorded');
    this.base = run;
    this.ledger.bytes += bytes;
  }

  /**
   * The recorded result, of the types it had (opened first with `encryption`). One that cannot be opened (sealed with
   * a key this instance lacks, tampered with) fails closed as the module's `record-unreadable`: the step never runs again.
   */
  private opened(step: RecordedStep): unknown {
    const { sealer } = this.deps;
    if (!sealer) return replayedBody(step.result);
    try {
      return replayedBody(sealer.open(stepSealKey(this.call.recordKey, step.name), step.result));
    } catch (error) {
      const reason = error instanceof UnreadableRecordError ? error.message : `it cannot be decoded (${String(error)})`;
      new Logger('Idempotency').error({
        msg: 'recorded step unreadable; answering 500 record-unreadable, never re-running it',
        key: this.call.recordKey,
        step: step.name,
        reason,
      });
      throw new IdempotencyRecordUnreadableError(
        `the recorded result of step(${JSON.stringify(step.name)}): ${reason}`,
      );
    }
  }

  /** Whether this caller may have lost the lease: a write was refused, or its end (less the skew margin) has passed. */
  private leaseGone(): boolean {
    const { leaseEndsAt, leaseLost } = this.lease;
    return leaseLost || this.deps.clock.nowSeconds() >= leaseEndsAt - this.call.clockSkewSeconds;
  }

  private lost(why: string, current?: IdempotencyRecord): IdempotencyLeaseLostError {
    this.deps.telemetry.step('lease_lost');
    new Logger('Idempotency').warn({ msg: `step refused: ${why}`, key: this.call.recordKey });
    const now = this.deps.clock.nowSeconds();
    const retryAfter = current === undefined ? 1 : retryAfterSeconds(this.call, current, now);
    return new IdempotencyLeaseLostError(retryAfter);
  }
}

/** A step of work the call left running, once the call ended: nothing of it would be kept. */
function callEnded(name: string, what: string): Error {
  return new Error(`IdempotencyContext.step(${JSON.stringify(name)}): the call has already ended; ${what}.`);
}

/** A step's result over its limit, or over what the request's steps may take together, is refused. */
function limitSize(name: string, bytes: number, recordedBytes: number): void {
  const step = `IdempotencyContext.step(${JSON.stringify(name)})`;
  if (bytes > MAX_STEP_RESULT_BYTES) {
    throw new RangeError(
      `${step}: it takes ${bytes} bytes stored (its name and result), over the limit of ${MAX_STEP_RESULT_BYTES}.`,
    );
  }
  if (recordedBytes + bytes > MAX_STEPS_BYTES) {
    throw new RangeError(
      `${step}: with it, this request's steps would take ${recordedBytes + bytes} bytes stored, over the limit of ${MAX_STEPS_BYTES} for all of them.`,
    );
  }
}
