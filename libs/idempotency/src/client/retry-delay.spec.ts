import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { backoffMs, retryAfterMs } from './retry-delay';

describe('the client’s retry delays', () => {
  it('reads Retry-After as seconds or as an HTTP date, and nothing else', () => {
    const now = Date.parse('Fri, 04 Dec 2026 10:00:00 GMT');
    expect(retryAfterMs('3', now)).toBe(3000);
    expect(retryAfterMs(' 0 ', now)).toBe(0);
    expect(retryAfterMs('Fri, 04 Dec 2026 10:00:05 GMT', now)).toBe(5000);
    expect(retryAfterMs('Fri, 04 Dec 2026 09:59:00 GMT', now)).toBe(0); // a date past is now
    expect(retryAfterMs(null, now)).toBeUndefined();
    expect(retryAfterMs('soon', now)).toBeUndefined();
    expect(retryAfterMs('-1', now)).toBeUndefined();
  });

  it('reads the three HTTP-date forms of RFC 9110, all GMT', () => {
    const now = Date.parse('Fri, 04 Dec 2026 10:00:00 GMT');
    expect(retryAfterMs('Friday, 04-Dec-26 10:00:07 GMT', now)).toBe(7000); // RFC 850
    expect(retryAfterMs('Fri Dec  4 10:00:09 2026', now)).toBe(9000); // asctime, whatever the local zone
    expect(retryAfterMs('Fri Dec 14 10:00:00 2026', now)).toBe(10 * 24 * 3600 * 1000);
    // A two-digit year more than 50 years ahead is in the past century: a date past is now.
    expect(retryAfterMs('Sunday, 06-Nov-94 08:49:37 GMT', now)).toBe(0);
    expect(retryAfterMs('Friday, 04-Dec-76 10:00:00 GMT', now)).toBe(Date.UTC(2076, 11, 4, 10) - now);
    expect(retryAfterMs('Fri, 04 Foo 2026 10:00:05 GMT', now)).toBeUndefined();
    expect(retryAfterMs('Fri, 04 Dec 2026 10:00:05 PST', now)).toBeUndefined();
  });

  it('backs off exponentially with full jitter, capped at 5 s', () => {
    expect([1, 2, 3, 4].map((attempt) => backoffMs(attempt, () => 0.999999))).toEqual([199, 399, 799, 1599]);
    expect(backoffMs(10, () => 0.999999)).toBe(4999);
    expect(backoffMs(3, () => 0)).toBe(0);
  });

  it('imports no package, so that it runs without Nest or the AWS SDK', () => {
    for (const file of readdirSync(__dirname).filter((name) => name.endsWith('.ts') && !name.endsWith('.spec.ts'))) {
      const source = readFileSync(join(__dirname, file), 'utf8');
      const specifiers = [...source.matchAll(/from '([^']+)'|import '([^']+)'/g)].map((match) => match[1] ?? match[2]);
      for (const specifier of specifiers) expect(`${file}: ${specifier}`).toMatch(/: \.\.?\//);
    }
  });
});
