import { IdempotencyClock } from '../idempotency.clock';
import { StoredResponse } from '../repository/idempotency.record';
import { MAX_CACHED_RESPONSE_BYTES, ReplayCache } from './replay-cache';

const response = (body: unknown = { ok: true }): StoredResponse => ({ statusCode: 200, headers: {}, body });

/** Elapsed time is `ms`; the wall clock reads `ms` plus `wallStepMs` (an NTP or operator step). */
class TestClock extends IdempotencyClock {
  ms = 0;
  wallStepMs = 0;
  nowMs(): number {
    return this.ms + this.wallStepMs;
  }
  monotonicMs(): number {
    return this.ms;
  }
}
const clock = new TestClock();
const cacheOf = (maxEntries: number, maxAgeSeconds = Infinity) => new ReplayCache({ maxEntries, maxAgeSeconds, clock });
/** The entry as a lookup at `seconds` finds it. */
const getAt = (cache: ReplayCache, key: string, seconds: number) => {
  clock.ms = seconds * 1000;
  return cache.get(key);
};

describe('ReplayCache', () => {
  it('answers a record until its expiresAt, and not after', () => {
    const cache = cacheOf(10);
    cache.set('k', { fingerprint: 'fp', expiresAt: 100, response: response() });
    expect(getAt(cache, 'k', 100)?.fingerprint).toBe('fp');
    expect(getAt(cache, 'k', 101)).toBeUndefined();
    expect(cache.size).toBe(0); // an expired entry is dropped when it is found
  });

  it('keeps the most recently used entries within maxEntries', () => {
    const cache = cacheOf(2);
    cache.set('a', { fingerprint: 'a', expiresAt: 100, response: response() });
    cache.set('b', { fingerprint: 'b', expiresAt: 100, response: response() });
    getAt(cache, 'a', 0); // a is now the most recently used
    cache.set('c', { fingerprint: 'c', expiresAt: 100, response: response() });
    expect(getAt(cache, 'b', 0)).toBeUndefined();
    expect(getAt(cache, 'a', 0)).toBeDefined();
    expect(getAt(cache, 'c', 0)).toBeDefined();
  });

  it('counts an entry set again as the most recently used', () => {
    const cache = cacheOf(2);
    cache.set('a', { fingerprint: 'a', expiresAt: 100, response: response() });
    cache.set('b', { fingerprint: 'b', expiresAt: 100, response: response() });
    cache.set('a', { fingerprint: 'a', expiresAt: 200, response: response() });
    cache.set('c', { fingerprint: 'c', expiresAt: 100, response: response() });
    expect(getAt(cache, 'b', 0)).toBeUndefined();
    expect(getAt(cache, 'a', 150)?.expiresAt).toBe(200);
  });

  it('keeps nothing when off, nothing without a body, and nothing over 64 KB', () => {
    const off = cacheOf(0);
    off.set('k', { fingerprint: 'fp', expiresAt: 100, response: response() });
    expect(off.size).toBe(0);
    const cache = cacheOf(10);
    cache.set('omitted', {
      fingerprint: 'fp',
      expiresAt: 100,
      response: { statusCode: 200, headers: {}, bodyOmitted: true },
    });
    cache.set('large', {
      fingerprint: 'fp',
      expiresAt: 100,
      response: response('x'.repeat(MAX_CACHED_RESPONSE_BYTES)),
    });
    cache.set('small', { fingerprint: 'fp', expiresAt: 100, response: response('x'.repeat(1000)) });
    expect([getAt(cache, 'omitted', 0), getAt(cache, 'large', 0)]).toEqual([undefined, undefined]);
    expect(getAt(cache, 'small', 0)).toBeDefined();
  });

  it('keeps a response of exactly 64 KB as JSON, and not one byte more', () => {
    const cache = cacheOf(10);
    const overhead = Buffer.byteLength(JSON.stringify(response('')));
    const fits = response('x'.repeat(MAX_CACHED_RESPONSE_BYTES - overhead));
    const over = response('x'.repeat(MAX_CACHED_RESPONSE_BYTES - overhead + 1));
    cache.set('fits', { fingerprint: 'fp', expiresAt: 100, response: fits });
    cache.set('over', { fingerprint: 'fp', expiresAt: 100, response: over });
    expect(getAt(cache, 'fits', 0)).toBeDefined();
    expect(getAt(cache, 'over', 0)).toBeUndefined();
  });

  it('trusts an entry for maxAgeSeconds after it was set, then no longer (a purge elsewhere takes effect)', () => {
    const cache = cacheOf(10, 10);
    clock.ms = 1_000_000;
    cache.set('k', { fingerprint: 'fp', expiresAt: 86_400_000, response: response() });
    expect(getAt(cache, 'k', 1009.999)).toBeDefined();
    expect(getAt(cache, 'k', 1010)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('measures maxAgeSeconds in elapsed time, so a wall clock stepped back does not stretch it', () => {
    const cache = cacheOf(10, 10);
    clock.ms = 1_000_000;
    cache.set('k', { fingerprint: 'fp', expiresAt: 86_400_000, response: response() });
    clock.wallStepMs = -5000;
    try {
      expect(getAt(cache, 'k', 1009.999)).toBeDefined();
      expect(getAt(cache, 'k', 1010)).toBeUndefined(); // the wall clock reads 1005 s
    } finally {
      clock.wallStepMs = 0;
    }
  });

  it('stops answering at expiresAt on the wall clock, however little time has elapsed', () => {
    const cache = cacheOf(10, 10);
    clock.ms = 100_000;
    cache.set('k', { fingerprint: 'fp', expiresAt: 105, response: response() });
    clock.wallStepMs = 6000;
    try {
      expect(getAt(cache, 'k', 100)).toBeUndefined(); // the wall clock reads 106 s
    } finally {
      clock.wallStepMs = 0;
    }
  });

  it('forgets an evicted entry at once', () => {
    const cache = cacheOf(10);
    cache.set('k', { fingerprint: 'fp', expiresAt: 100, response: response() });
    cache.evict('k');
    expect(getAt(cache, 'k', 0)).toBeUndefined();
  });
});
