import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import {
  IdempotencyCommitRejectedError,
  IdempotencyInFlightError,
  IdempotencyMismatchError,
} from '../errors/idempotency.errors';
import { IdempotencyClock } from '../idempotency.clock';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { CommitWrite } from '../repository/commit-write';
import { StoredResponse } from '../repository/idempotency.record';
import { IdempotencyRepository, PutCompletedResult } from '../repository/idempotency.repository';
import { ResponseSealer } from '../response/response-sealing';
import { completedResponse } from './completed-response';
import { boundContext, runInClaim, RunningClaim } from './idempotency-context';
import { describeWrite, retryThroughStoreFaults } from './outcome-recorder';
import { OwnerEnvironment } from './key-owner';
import { ProtectedCall, ProtectedWork, retryAfterSeconds } from './protected-call';
import { ReplayCache } from './replay-cache';
import { captured, capturedError, isFinal } from './work-outcome';

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
 * flight. An outcome that is not final is not stored, and the work's writes are dropped with it.
 */
export class OptimisticRun {
  private readonly logger = new Logger('Idempotency');

  constructor(private readonly deps: OptimisticDependencies) {}

  async run<T>(call: ProtectedCall, work: ProtectedWork<T>): Promise<OptimisticOutcome<T>> {
    const claim: RunningClaim = {
      recordKey: call.recordKey,
      claimToken: randomUUID(),
      canCommitWith: await this.deps.canCommitWith().catch(() => false),
      writes: [],
      open: true,
    };
    let outcome: { result: T } | { error: unknown };
    try {
      outcome = { result: await runInClaim(claim, () => work.execute(boundContext(claim)), this.deps.tracked()) };
    } catch (error) {
      outcome = { error };
    } finally {
      claim.open = false;
    }
    const writes = 'result' in outcome ? claim.writes : [];
    const stored = this.finalOutcome(call, work, outcome, writes);
    if (stored) {
      const replay = await this.store(call, claim.claimToken, stored, writes);
      if (replay) return { replay };
    }
    this.deps.telemetry.request('executed');
    if ('error' in outcome) throw outcome.error;
    return outcome;
  }

  /** What to store: a result (always, with writes: they are committed with it), or an error, when final. */
  private finalOutcome<T>(
    call: ProtectedCall,
    work: ProtectedWork<T>,
    outcome: { result: T } | { error: unknown },
    writes: CommitWrite[],
  ): StoredResponse | undefined {
    if ('error' in outcome) {
      const stored = capturedError(this.logger, call, work, outcome.error);
      return stored && isFinal(this.logger, call, work, stored, outcome.error) ? stored : undefined;
    }
    const stored = captured(this.logger, call, work, outcome.result);
    return writes.length > 0 || isFinal(this.logger, call, work, stored) ? stored : undefined;
  }

  /** Stores the outcome; undefined once stored, or the outcome another call stored first. */
  private async store(
    call: ProtectedCall,
    claimToken: string,
    response: StoredResponse,
    writes: CommitWrite[],
  ): Promise<StoredResponse | undefined> {
    const { repository, telemetry, sealer, cache, clock } = this.deps;
    const put: PutCompletedResult = await telemetry.span(
      'dedup.put_completed',
      { 'idempotency.key': call.recordKey },
      async (span) => {
        const result = await retryThroughStoreFaults(() =>
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
        );
        span.setAttribute('dynamo.condition_result', result.ok ? 'won' : result.reason);
        return result;
      },
    );
    if (put.ok) {
      cache.set(call.recordKey, { fingerprint: call.fingerprint, expiresAt: put.expiresAt, response });
      return undefined;
    }
    if (put.reason === 'commit_rejected') {
      throw new IdempotencyCommitRejectedError(put.writeIndex, describeWrite(writes[put.writeIndex]));
    }
    const { current } = put;
    if (current.fingerprint !== call.fingerprint) throw new IdempotencyMismatchError();
    if (current.status !== 'COMPLETED') {
      throw new IdempotencyInFlightError(retryAfterSeconds(call, current, clock.nowSeconds()));
    }
    const winner = completedResponse(current, sealer, this.logger);
    cache.set(call.recordKey, { fingerprint: current.fingerprint, expiresAt: current.expiresAt, response: winner });
    return winner;
  }
}
