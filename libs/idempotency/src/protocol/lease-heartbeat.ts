import { Logger } from '@nestjs/common';
import { IdempotencyClock } from '../idempotency.clock';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { leaseSecondsAt, ProtectedCall } from './protected-call';
import { renewals, Repeating } from './renewal-timer';

/** What a heartbeat renews: the claimed record, its lease, how long to renew it, and an invocation's deadline. */
export type LeasedCall = Pick<
  ProtectedCall,
  'recordKey' | 'partition' | 'leaseSeconds' | 'maxLeaseSeconds' | 'deadline'
>;

/**
 * Where each new lease end (epoch seconds) is written after a renewal, and a refused renewal: the claim's `Flight`
 * (steps read both before they start).
 */
export interface LeaseEnd {
  leaseEndsAt: number;
  leaseLost: boolean;
}

/**
 * Keeps a won claim's lease alive while its owner works: every third of the lease, `renew` (conditioned on the
 * claim token). One renewal in flight at a time; one that fails on a store fault is tried again at the next tick.
 * A handler shorter than a third of the lease costs no renewal. A refused renewal means another caller took the key
 * over (this process was paused or partitioned past the lease): counted, logged once, and renewals end; the work
 * goes on and its completion is refused by the same token guard. The heartbeat is itself its entry in the process's
 * `RenewalTimer`: a claim costs one object for its renewals.
 */
export class LeaseHeartbeat implements Repeating {
  private static readonly logger = new Logger('Idempotency');
  readonly intervalMs: number;
  dueAt = 0;
  private readonly renewUntil: number;
  private renewing = false;
  private stopped = false;

  private readonly repository: IdempotencyRepository;
  private readonly telemetry: IdempotencyTelemetry;
  private readonly clock: IdempotencyClock;

  constructor(
    owner: { repository: IdempotencyRepository; telemetry: IdempotencyTelemetry; clock: IdempotencyClock },
    private readonly call: LeasedCall,
    private readonly claimToken: string,
    private readonly lease: LeaseEnd,
  ) {
    ({ repository: this.repository, telemetry: this.telemetry, clock: this.clock } = owner);
    this.intervalMs = (call.leaseSeconds * 1000) / 3;
    this.renewUntil = performance.now() + call.maxLeaseSeconds * 1000;
    renewals.add(this);
  }

  /** Ends the renewals: the outcome is written, or the process is shutting down (then it behaves as if crashed). */
  stop(): void {
    this.stopped = true;
    renewals.cancel(this);
  }

  /** The timer's tick. */
  run(): void {
    void this.tick();
  }

  private async tick(): Promise<void> {
    if (this.renewing || this.stopped) return;
    if (performance.now() >= this.renewUntil) {
      LeaseHeartbeat.logger.warn({
        msg: 'handler still running after maxLeaseSeconds: lease no longer renewed',
        key: this.call.recordKey,
      });
      this.stop();
      return;
    }
    // A tick that fires after the deadline (a frozen Lambda container, thawed) renews nothing: the lease was the
    // invocation's, and may belong to another caller by now.
    const leaseSeconds = leaseSecondsAt(this.call, this.clock.nowSeconds());
    if (leaseSeconds === 0) return this.stop();
    this.renewing = true;
    try {
      const { recordKey: key, partition } = this.call;
      const result = await this.repository.renew({ key, partition, claimToken: this.claimToken, leaseSeconds });
      if (result.ok) {
        if (!this.stopped) this.lease.leaseEndsAt = result.expiresAt;
        return;
      }
      this.stop();
      // Refused because this claim's own outcome landed meanwhile: nothing was lost.
      if (result.reason !== 'lease_lost') return;
      this.lease.leaseLost = true;
      this.telemetry.leaseRenewalRefused();
      LeaseHeartbeat.logger.warn({
        msg: 'lease renewal refused: another caller took the key over; the running handler will not be recorded',
        key,
        current_status: result.current?.status,
      });
    } catch (error) {
      LeaseHeartbeat.logger.warn({
        msg: 'lease renewal failed; retried at the next tick',
        key: this.call.recordKey,
        error: String(error),
      });
    } finally {
      this.renewing = false;
    }
  }
}
