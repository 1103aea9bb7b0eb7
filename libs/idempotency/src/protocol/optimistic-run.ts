import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { IdempotencyInFlightError, IdempotencyMismatchError } from '../errors/idempotency.errors';
import { IdempotencyClock } from '../idempotency.clock';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { CommitWrite } from '../repository/commit-write';
import { isClaimable, StoredResponse } from '../repository/idempotency.record';
import { IdempotencyRepository, PutCompletedResult } from '../repository/idempotency.repository';
import { ResponseSealer } from '../response/response-sealing';
import { replayOf } from './completed-response';
import { commitRejected, retryThroughStoreFaults, writeOutcome } from './outcome-recorder';
import { ProtectedCall, ProtectedWork, retryAfterSeconds } from './protected-call';
import { ReplayCache } from './replay-cache';
import { UnrecordedSteps } from './unrecorded-steps';
import { finalOutcome, OwnerEnvironment, runUnderClaim } from './work-outcome';

/** Where an optimistic run writes and what it reads of the module. */
export interface OptimisticDependencies extends OwnerEnvironment {
  repository: IdempotencyRepository;
  clock: IdempotencyClock;
  telemetry: IdempotencyTelemetry;
  cache: ReplayCache;
  sealer?: ResponseSealer;
}

/** The work's own outcome, or the outcome another call stored first (to replay). */
export type OptimisticOutcome<T> = { result: T } | { replay: StoredResponse };

/**
 * `mode: 'optimistic'`: no claim. The work runs (with a context whose `commitWith` writes go with the record), then
 * one write stores its final outcome where no other call's record is (`putCompleted`): one DynamoDB call for a first
 * request. A call that finds another's record there gets that outcome instead of its own (its own `commitWith`
 * writes were not committed), a different request's record is a mismatch, a lease-mode claim still running is in
 * flight. An error that is not final (`storeIf`) is not stored; a result without writes likewise.
 */
export class OptimisticRun {
  private readonly logger = new Logger('Idempotency');

  constructor(private readonly deps: OptimisticDependencies) {}

  async run<T>(call: ProtectedCall, work: ProtectedWork<T>): Promise<OptimisticOutcome<T>> {
    const claimToken = randomUUID();
    const route = () => work.origin?.().operation ?? call.recordKey;
    const steps = new UnrecordedSteps(call, route);
    const { outcome, writes } = await runUnderClaim(call, claimToken, work, this.deps, steps);
    const stored = finalOutcome(this.logger, call, work, outcome, writes);
    const replay = stored ? await this.store(call, claimToken, stored, writes) : await this.storedBefore(call);
    if (replay) return { replay };
    this.deps.telemetry.request('executed', call, stored?.statusCode);
    if ('error' in outcome) throw outcome.error;
    return outcome;
  }

  /**
   * After an outcome that is not final (a transient error): the answer another call stored for the same request, if
   * any. A duplicate of a completed request gets the stored response, even when its own run failed (the payment went
   * through the first time). Read on this path only; a store fault reading it leaves the call's own outcome.
   */
  private async storedBefore(call: ProtectedCall): Promise<StoredResponse | undefined> {
    const { repository, clock, cache, sealer } = this.deps;
    let record;
    try {
      record = await repository.get({ key: call.recordKey, partition: call.partition });
    } catch (error) {
      this.logger.warn({
        msg: 'could not look for a stored answer after a run that failed',
        key: call.recordKey,
        error: String(error),
      });
      return undefined;
    }
    if (record?.status !== 'COMPLETED' || record.fingerprint !== call.fingerprint) return undefined;
    if (isClaimable(record, clock.nowSeconds())) return undefined;
    return replayOf(call.recordKey, record, { sealer, logger: this.logger, cache });
  }

  /** Stores the outcome; undefined once stored, or the outcome another call stored first. */
  private async store(
    call: ProtectedCall,
    claimToken: string,
    response: StoredResponse,
    writes: CommitWrite[],
  ): Promise<StoredResponse | undefined> {
    const { repository, telemetry, sealer, cache, clock } = this.deps;
    const put: PutCompletedResult = await telemetry.storeSpan(
      'dedup.put_completed',
      call.recordKey,
      () =>
        retryThroughStoreFaults(() =>
          repository.putCompleted({
            claimToken,
            key: call.recordKey,
            partition: call.partition,
            fingerprint: call.fingerprint,
            response: sealer ? sealer.seal(call.recordKey, response) : response,
            ttlSeconds: call.ttlSeconds,
            clockSkewSeconds: call.clockSkewSeconds,
            writes: writes.length > 0 ? writes : undefined,
          }),
        ),
      writeOutcome,
    );
    if (put.ok) {
      cache.set(call.recordKey, { fingerprint: call.fingerprint, expiresAt: put.expiresAt, response });
      return undefined;
    }
    if (put.reason === 'commit_rejected') {
      throw commitRejected(this.logger, call, put.writeIndex, writes);
    }
    const { current } = put;
    if (current.fingerprint !== call.fingerprint) throw new IdempotencyMismatchError();
    if (current.status !== 'COMPLETED') {
      throw new IdempotencyInFlightError(retryAfterSeconds(call, current, clock.nowSeconds()));
    }
    return replayOf(call.recordKey, current, { sealer, logger: this.logger, cache });
  }
}
