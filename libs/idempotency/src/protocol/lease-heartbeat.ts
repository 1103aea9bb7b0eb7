import { Logger } from '@nestjs/common';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { leaseSecondsAt } from './protected-call';
import { renewals, Repeating } from './renewal-timer';

export interface HeartbeatInput {
  /** The record key (route and hashed key: safe to log). */
  key: string;
  /** Its partition in a sort-key layout. */
  partition?: string;
  claimToken: string;
  leaseSeconds: number;
  /** After this long the lease is no longer renewed. */
  maxLeaseSeconds: number;
  /** An AWS Lambda invocation's deadline (epoch seconds): no renewal reaches past it, none is sent after it. */
  deadline?: number;
  /** Told the new lease end (epoch seconds) after each renewal. */
  renewed(expiresAt: number): void;
}

/**
 * Keeps a won claim's lease alive while its owner works: every third of the lease, `renew` (conditioned on the
 * claim token). One renewal in flight at a time; one that fails on a store fault is tried again at the next tick.
 * A handler shorter than a third of the lease costs no renewal. A refused renewal means another caller took the key
 * over (this process was paused or partitioned past the lease): counted, logged once, and renewals end; the work
 * goes on and its completion is refused by the same token guard.
 */
export class LeaseHeartbeat {
  private static readonly logger = new Logger('Idempotency');
  private readonly renewal: Repeating;
  private readonly renewUntil: number;
  private renewing = false;
  private stopped = false;

  constructor(
    private readonly repository: IdempotencyRepository,
    private readonly telemetry: IdempotencyTelemetry,
    private readonly input: HeartbeatInput,
  ) {
    this.renewUntil = performance.now() + input.maxLeaseSeconds * 1000;
    this.renewal = renewals.every((input.leaseSeconds * 1000) / 3, () => void this.tick());
  }

  /** Ends the renewals: the outcome is written, or the process is shutting down (then it behaves as if crashed). */
  stop(): void {
    this.stopped = true;
    renewals.cancel(this.renewal);
  }

  private async tick(): Promise<void> {
    if (this.renewing || this.stopped) return;
    if (performance.now() >= this.renewUntil) {
      LeaseHeartbeat.logger.warn({
        msg: 'handler still running after maxLeaseSeconds: lease no longer renewed',
        key: this.input.key,
      });
      this.stop();
      return;
    }
    // A tick that fires after the deadline (a frozen Lambda container, thawed) renews nothing: the lease was the
    // invocation's, and may belong to another caller by now.
    const leaseSeconds = leaseSecondsAt(this.input, Math.floor(Date.now() / 1000));
    if (leaseSeconds === 0) return this.stop();
    this.renewing = true;
    try {
      const { key, partition, claimToken } = this.input;
      const result = await this.repository.renew({ key, partition, claimToken, leaseSeconds });
      if (result.ok) {
        if (!this.stopped) this.input.renewed(result.expiresAt);
        return;
      }
      this.stop();
      // Refused because this claim's own outcome landed meanwhile: nothing was lost.
      if (result.reason !== 'lease_lost') return;
      this.telemetry.leaseRenewalRefused();
      LeaseHeartbeat.logger.warn({
        msg: 'lease renewal refused: another caller took the key over; the running handler will not be recorded',
        key,
        current_status: result.current?.status,
      });
    } catch (error) {
      LeaseHeartbeat.logger.warn({
        msg: 'lease renewal failed; retried at the next tick',
        key: this.input.key,
        error: String(error),
      });
    } finally {
      this.renewing = false;
    }
  }
}
