import { Logger } from '@nestjs/common';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { boundContext, runInClaim, RunningClaim } from './idempotency-context';
import { LeaseHeartbeat } from './lease-heartbeat';
import { OutcomeRecorder } from './outcome-recorder';
import { ProtectedCall, ProtectedWork } from './protected-call';
import { Flight } from './single-flight';
import { captured, capturedError, isFinal } from './work-outcome';

/** What the owner needs to know when its run starts. */
export interface OwnerEnvironment {
  /** Whether the store commits `commitWith` writes with the completion. */
  canCommitWith(): Promise<boolean>;
  /** Whether calls are tracked through AsyncLocalStorage (the application injects `IdempotencyContext`). */
  tracked(): boolean;
}

/**
 * Runs the work as the key's owner: its lease renewed meanwhile (`LeaseHeartbeat`), the running claim available to it
 * (`IdempotencyContext`), then the outcome recorded before the result is handed back. Once the work has succeeded the
 * key is never released for a re-run: a result that cannot be stored completes the record without a body.
 */
export class KeyOwner {
  private readonly logger = new Logger('Idempotency');
  private readonly heartbeats = new Set<LeaseHeartbeat>();

  constructor(
    private readonly repository: IdempotencyRepository,
    private readonly telemetry: IdempotencyTelemetry,
    private readonly recorder: OutcomeRecorder,
    private readonly environment: OwnerEnvironment,
  ) {}

  async run<T>(call: ProtectedCall, claimToken: string, work: ProtectedWork<T>, flight: Flight): Promise<T> {
    const heartbeat = new LeaseHeartbeat(this.repository, this.telemetry, {
      key: call.recordKey,
      partition: call.partition,
      claimToken,
      leaseSeconds: call.leaseSeconds,
      maxLeaseSeconds: call.maxLeaseSeconds,
      deadline: call.deadline,
      renewed: (expiresAt) => (flight.leaseEndsAt = expiresAt),
    });
    this.heartbeats.add(heartbeat);
    const claim: RunningClaim = {
      recordKey: call.recordKey,
      claimToken,
      canCommitWith: await this.environment.canCommitWith().catch(() => false),
      writes: [],
      open: true,
    };
    try {
      let result: T;
      try {
        result = await runInClaim(claim, () => work.execute(boundContext(claim)), this.environment.tracked());
      } catch (error) {
        // A final error (storeIf) is stored and replayed like a result; any other releases the key. Its writes are dropped.
        const stored = capturedError(this.logger, call, work, error);
        await this.recorder.settle(
          call,
          claimToken,
          stored && isFinal(this.logger, call, work, stored, error) ? stored : undefined,
        );
        throw error;
      } finally {
        claim.open = false;
      }
      const stored = captured(this.logger, call, work, result);
      // Writes make the outcome final whatever storeIf says: they are committed with it, so their effects exist.
      if (claim.writes.length > 0) return await this.recorder.commit(call, claimToken, stored, claim.writes, result);
      await this.recorder.settle(call, claimToken, isFinal(this.logger, call, work, stored) ? stored : undefined);
      return result;
    } finally {
      heartbeat.stop();
      this.heartbeats.delete(heartbeat);
    }
  }

  /** A stopping process renews nothing more: for the other instances it is as if it had crashed. */
  stopRenewing(): void {
    for (const heartbeat of this.heartbeats) heartbeat.stop();
    this.heartbeats.clear();
  }
}
