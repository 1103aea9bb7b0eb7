/**
 * A key for one tick of a schedule (`@Cron`, `@Interval`): the tick's time, rounded to the nearest multiple of the
 * period, as an ISO string. Every instance that fires for the same tick computes the same key even when its clock or
 * its timer is a little early or late (up to half a period), so one of them runs the job and the others get its result.
 *
 * @example
 * ```ts
 * @Cron(CronExpression.EVERY_MINUTE)
 * @Idempotent({ key: () => tickKey(60), waitMs: 10_000 })
 * async sendReminders() { ... }
 * ```
 */
export function tickKey(periodSeconds = 60, at: number | Date = Date.now()): string {
  if (!Number.isFinite(periodSeconds) || periodSeconds <= 0) {
    throw new RangeError(`tickKey: the period must be a positive number of seconds (got ${periodSeconds})`);
  }
  const periodMs = periodSeconds * 1000;
  return new Date(Math.round(Number(at) / periodMs) * periodMs).toISOString();
}
