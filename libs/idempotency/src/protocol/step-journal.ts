import { Logger } from '@nestjs/common';
import {
  IdempotencyError,
  IdempotencyLeaseLostError,
  IdempotencyRecordUnreadableError,
} from '../errors/idempotency.errors';
import { IdempotencyClock } from '../idempotency.clock';
import { MAX_STEP_RESULT_BYTES, MAX_STEPS_BYTES } from '../idempotency.constants';
import { derivedKeyOf } from '../keys/derived-key';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRecord, RecordedStep, StoredResponse } from '../repository/idempotency.record';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { ResponseSealer, stepSealKey, UnreadableRecordError } from '../response/response-sealing';
import { replayedBody } from '../response/stored-response.codec';
import { stepEntryBytes } from '../response/step-value';
import { encodeTyped } from '../response/typed-value';
import { retryThroughStoreFaults } from './outcome-recorder';
import { ProtectedCall, retryAfterSeconds, StepLedger } from './protected-call';
import { runStep, StepFunction, StepRunner, uniqueName } from './step-runner';

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
}

/**
 * The recovery points of one owned run (`IdempotencyContext.step`). A step recorded by an earlier run of the same
 * request is answered from its record without running; any other step runs once its caller is known to hold the lease,
 * and its result is recorded (one conditional write, guarded by the claim token) before it is handed back.
 */
export class StepJournal implements StepRunner {
  private readonly recorded = new Map<string, RecordedStep>();
  private readonly names = new Set<string>();
  /** The run that recorded the latest step (1 if none): a step not recorded may have been started by every run since. */
  private base = 1;
  private readonly ledger: StepLedger = { bytes: 0, unfinished: 0 };
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
    call.steps = this.ledger;
  }

  end(): void {
    this.ended = true;
  }

  async step<T>(name: string, fn: StepFunction<T>): Promise<T> {
    uniqueName(this.names, name);
    if (this.ended) throw callEnded(name, 'the step was not started');
    const { telemetry } = this.deps;
    const recorded = this.recorded.get(name);
    if (recorded) {
      telemetry.step('resumed');
      return this.opened(recorded) as T;
    }
    if (this.leaseGone()) throw this.lost('a step does not start once its caller may have lost the lease');
    const { recordKey } = this.call;
    const attempt = this.claim.run - this.base + 1;
    this.ledger.unfinished++;
    const key = derivedKeyOf(this.call, name);
    const value = await telemetry.stepSpan(recordKey, name, attempt, async () => runStep(fn, { key, attempt }));
    await this.record(name, attempt, value);
    this.ledger.unfinished--;
    return value;
  }

  private async record(name: string, attempt: number, value: unknown): Promise<void> {
    const { repository, telemetry, sealer } = this.deps;
    const { recordKey: key, partition } = this.call;
    const { claimToken, run } = this.claim;
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
      repository.recordStep({ key, partition, claimToken, step: { name, result, attempt, run } }),
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
    telemetry.step('run');
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
