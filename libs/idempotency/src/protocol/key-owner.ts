import { Logger } from '@nestjs/common';
import { IdempotencyLeaseLostError } from '../errors/idempotency.errors';
import { StepOutcomeUnknownError } from '../errors/step-errors';
import { LeaseHeartbeat } from './lease-heartbeat';
import { OutcomeRecorder } from './outcome-recorder';
import { crashedTooOften, poison, storeUnknownOutcome } from './poisoned-keys';
import { ProtectedCall, ProtectedWork } from './protected-call';
import { WonClaim } from './single-flight';
import { StepJournal, StepJournalDependencies } from './step-journal';
import { StepRunner } from './step-runner';
import { finalOutcome, OwnerEnvironment, runUnderClaim } from './work-outcome';

/**
 * Runs the work as the key's owner: its lease renewed meanwhile (`LeaseHeartbeat`), the running claim available to it
 * (`IdempotencyContext`, its steps recorded by a `StepJournal`), then the outcome recorded before the result is handed
 * back. Once the work has succeeded the key is never released for a re-run: a result that cannot be stored completes
 * the record without a body.
 */
export class KeyOwner {
  private readonly logger = new Logger('Idempotency');
  private readonly heartbeats = new Set<LeaseHeartbeat>();

  constructor(
    private readonly journal: StepJournalDependencies,
    private readonly recorder: OutcomeRecorder,
    private readonly environment: OwnerEnvironment,
  ) {}

  async run<T>(call: ProtectedCall, won: WonClaim, work: ProtectedWork<T>): Promise<T> {
    const { claimToken, flight } = won;
    const crashed = crashedTooOften(call, won);
    if (crashed) return poison(this.journal, call, claimToken, crashed);
    // Each renewal moves the flight's lease end: requests that join it know how long the owner holds the key.
    const heartbeat = new LeaseHeartbeat(this.journal, call, claimToken, flight);
    this.heartbeats.add(heartbeat);
    try {
      const { outcome, writes } = await runUnderClaim(call, claimToken, work, this.environment, this.steps(call, won));
      if ('error' in outcome && outcome.error instanceof IdempotencyLeaseLostError) {
        // A step found the lease lost: nothing of this run is stored; the successor's outcome (if any) stands.
        await this.recorder.abandon(call, claimToken);
        throw outcome.error;
      }
      if ('error' in outcome && outcome.error instanceof StepOutcomeUnknownError) {
        return storeUnknownOutcome(this.journal, call, claimToken, outcome.error);
      }
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

  /** The run's steps: recorded on the record, or refused before they start on a store that cannot record them. */
  private steps(call: ProtectedCall, { claimToken, flight, run, steps = [], startedSteps }: WonClaim): StepRunner {
    if (run !== undefined) return new StepJournal(this.journal, call, { claimToken, run, steps, startedSteps }, flight);
    const store = this.journal.repository.constructor.name;
    return {
      step: () => Promise.reject(new Error(`IdempotencyContext.step: ${store} cannot record steps.`)),
    };
  }
}
