/** The first retry's backoff ceiling, and the most any backoff waits. */
const BASE_BACKOFF_MS = 200;
const MAX_BACKOFF_MS = 5_000;

/**
 * Exponential backoff with full jitter (a random wait up to 200 ms × 2^(attempt − 1), at most 5 s): retries of many
 * clients spread out instead of arriving together.
 */
export function backoffMs(attempt: number, random = Math.random): number {
  return Math.floor(random() * Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** (attempt - 1)));
}

/** `Retry-After` in milliseconds: delay-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  if (!/^[A-Za-z]{3},? /.test(value)) return undefined; // an HTTP date starts with the day's name
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
