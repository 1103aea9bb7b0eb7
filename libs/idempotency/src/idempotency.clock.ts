/**
 * The time source for every expiry decision. Injectable so tests move time instead of sleeping;
 * override it with `Test.createTestingModule(...).overrideProvider(IdempotencyClock)`.
 */
export abstract class IdempotencyClock {
  /** Milliseconds since the epoch. */
  abstract nowMs(): number;

  /** Whole seconds since the epoch, the unit of `expires_at`. */
  nowSeconds(): number {
    return Math.floor(this.nowMs() / 1000);
  }
}

/** The wall clock. */
export class SystemClock extends IdempotencyClock {
  nowMs(): number {
    return Date.now();
  }
}
