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

  /**
   * Milliseconds on a clock that a wall-clock step (NTP, an operator) does not move, for ages measured inside this
   * process, such as how long a cached replay is trusted. Only differences mean anything. Defaults to `nowMs()`, so a
   * test clock that overrides only `nowMs()` moves both.
   */
  monotonicMs(): number {
    return this.nowMs();
  }
}

/** The wall clock. */
export class SystemClock extends IdempotencyClock {
  nowMs(): number {
    return Date.now();
  }

  monotonicMs(): number {
    return performance.now();
  }
}
