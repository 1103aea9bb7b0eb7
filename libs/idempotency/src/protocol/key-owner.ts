import { Logger } from '@nestjs/common';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { LeaseHeartbeat } from './lease-heartbeat';
import { OutcomeRecorder } from './outcome-recorder';
import { ProtectedCall, ProtectedWork } from './protected-call';
import { Flight } from './single-flight';
import { finalOutcome, OwnerEnvironment, runUnderClaim } from './work-outcome';

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
    // Each renewal moves the flight's lease end: requests that join it know how long the owner holds the key.
    const heartbeat = new LeaseHeartbeat(this.repository, this.telemetry, call, claimToken, flight);
    this.heartbeats.add(heartbeat);
    try {
      const { outcome, writes } = await runUnderClaim(call, claimToken, work, this.environment);
      // A final outcome is stored and replayed; any other releases the key (an error's writes are dropped).
      const stored = finalOutcome(this.logger, call, work, outcome, writes);
      if ('error' in outcome) {
        await this.recorder.settle(call, claimToken, stored);
        throw outcome.error;
      }
      if (writes.length > 0) return await this.recorder.commit(call, claimToken, stored!, writes, outcome.result);
      await this.recorder.settle(call, claimToken, stored);
      return outcome.result;
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
