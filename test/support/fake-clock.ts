import { IdempotencyClock } from 'nestjs-dynamodb-idempotency';

/**
 * A clock that moves only when told to: leases and retention expire without sleeping. It starts at the next whole
 * second of real time, never in the past: DynamoDB Local really deletes items whose `expires_at` (TTL) has passed.
 */
export class FakeClock extends IdempotencyClock {
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
