import { IdempotencyClock } from 'nestjs-dynamodb-idempotency';

/** A clock that moves only when told to: leases and retention expire without sleeping. */
export class FakeClock extends IdempotencyClock {
  constructor(private ms = Date.UTC(2026, 10, 29, 12, 0, 0)) {
    super();
  }

  nowMs(): number {
    return this.ms;
  }

  advanceSeconds(seconds: number): void {
    this.ms += seconds * 1000;
  }
}
