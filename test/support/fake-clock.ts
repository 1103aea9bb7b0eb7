import { IdempotencyClock } from 'nestjs-dynamodb-idempotency';

/**
 * Where every fake clock of a test process starts (so two app instances agree): a whole second a week ahead of real
 * time. Never in the past, because DynamoDB Local really deletes items whose `expires_at` (TTL) has passed.
 */
const START_MS = Math.ceil(Date.now() / 1000) * 1000 + 7 * 86_400_000;

/** A clock that moves only when told to: leases and retention expire without sleeping. */
export class FakeClock extends IdempotencyClock {
  constructor(private ms = START_MS) {
    super();
  }

  nowMs(): number {
    return this.ms;
  }

  advanceSeconds(seconds: number): void {
    this.ms += seconds * 1000;
  }
}
