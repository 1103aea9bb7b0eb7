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

/**
 * `Retry-After` in milliseconds: delay-seconds or an HTTP date in any of its three forms (RFC 9110 §5.6.7, §10.2.3);
 * undefined when absent or unreadable.
 */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null) return undefined;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const date = httpDateMs(value, now);
  return date === undefined ? undefined : Math.max(0, date - now);
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
/** IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`), asctime (`Sun Nov  6 08:49:37 1994`). */
const FIXDATE = /^[a-z]{3}, (\d{2}) ([a-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/i;
const RFC850 = /^[a-z]{6,9}, (\d{2})-([a-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/i;
const ASCTIME = /^[a-z]{3} ([a-z]{3}) ( \d|\d{2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/i;

/** An HTTP date as epoch milliseconds (all three forms are GMT), or undefined. */
function httpDateMs(value: string, now: number): number | undefined {
  let parts: [string, string, string, string, string, string] | undefined; // day, month, year, hh, mm, ss
  let match = FIXDATE.exec(value) ?? RFC850.exec(value);
  if (match) parts = [match[1], match[2], match[3], match[4], match[5], match[6]];
  else if ((match = ASCTIME.exec(value))) parts = [match[2], match[1], match[6], match[3], match[4], match[5]];
  if (!parts) return undefined;
  const month = MONTHS.indexOf(parts[1].toLowerCase());
  if (month < 0) return undefined;
  let year = Number(parts[2]);
  if (parts[2].length === 2) {
    // RFC 9110: a two-digit year more than 50 years ahead is the most recent past year with those digits.
    const thisYear = new Date(now).getUTCFullYear();
    year += Math.floor(thisYear / 100) * 100;
    if (year > thisYear + 50) year -= 100;
  }
  const [day, hours, minutes, seconds] = [parts[0], parts[3], parts[4], parts[5]].map(Number);
  return Date.UTC(year, month, day, hours, minutes, seconds);
}
