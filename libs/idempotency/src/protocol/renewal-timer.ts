/** Work repeated every `intervalMs` while it is in a `RenewalTimer`. */
export interface Repeating {
  readonly intervalMs: number;
  /** `performance.now()` when it runs next (set when it is added). */
  dueAt: number;
  run(): void;
}

/**
 * One timer for every lease heartbeat of the process, armed for the earliest renewal due: a running claim costs an
 * entry in a set, not a timer of its own (most handlers end long before a third of their lease). A cancelled entry
 * leaves the timer armed, even when it was the last: a process that answers one request at a time would otherwise
 * set and clear a timer per request. A timer that fires with nothing due arms again only for an entry left.
 */
export class RenewalTimer {
  private readonly entries = new Set<Repeating>();
  private timer?: NodeJS.Timeout;
  /** When the armed timer fires (`performance.now()`); Infinity when none is. */
  private armedFor = Infinity;
  /** When it was armed: a clock that reads earlier since is another clock (a test's new fake one). */
  private armedAt = -Infinity;

  every(intervalMs: number, run: () => void): Repeating {
    return this.add({ intervalMs, dueAt: 0, run });
  }

  /** Runs `entry` every `entry.intervalMs` from now on, until it is cancelled. */
  add<E extends Repeating>(entry: E): E {
    const now = performance.now();
    entry.dueAt = now + entry.intervalMs;
    this.entries.add(entry);
    // An armed time already past has not fired: the loop is late, or the timer was lost with a test's fake clock, as
    // it was when the clock reads earlier than when it was armed.
    if (entry.dueAt < this.armedFor || this.armedFor < now || now < this.armedAt) this.arm(entry.dueAt, now);
    return entry;
  }

  cancel(entry: Repeating): void {
    this.entries.delete(entry);
  }

  private arm(at: number, now: number): void {
    clearTimeout(this.timer);
    this.armedFor = at;
    this.armedAt = now;
    this.timer = setTimeout(() => this.fire(), Math.max(0, at - now));
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = performance.now();
    for (const entry of this.entries) {
      if (entry.dueAt > now) continue;
      entry.dueAt = now + entry.intervalMs;
      entry.run();
    }
    let next = Infinity;
    for (const entry of this.entries) next = Math.min(next, entry.dueAt);
    if (next < this.armedFor) this.arm(next, now);
  }
}

/** The process's renewals. */
export const renewals = new RenewalTimer();
