import { IdempotencyClock } from '../idempotency.clock';

/**
 * A clock that moves only when told to, for tests: leases and retention expire without sleeping. Give the same clock
 * to the repository under test and, through `overrideProvider(IdempotencyClock)`, to the module.
 */
export class ManualClock extends IdempotencyClock {
  /** Starts at `startMs` (default: the next whole second of real time). */
  constructor(private ms = Math.ceil(Date.now() / 1000) * 1000) {
    super();
  }

  nowMs(): number {
    return this.ms;
  }

  advanceSeconds(seconds: number): void {
    this.ms += seconds * 1000;
  }
}
