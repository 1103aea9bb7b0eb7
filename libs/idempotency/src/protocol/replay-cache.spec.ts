import { StoredResponse } from '../repository/idempotency.record';
import { MAX_CACHED_RESPONSE_BYTES, ReplayCache } from './replay-cache';

const response = (body: unknown = { ok: true }): StoredResponse => ({ statusCode: 200, headers: {}, body });

describe('ReplayCache', () => {
  it('answers a record until its expiresAt, and not after', () => {
    const cache = new ReplayCache(10);
    cache.set('k', { fingerprint: 'fp', expiresAt: 100, response: response() });
    expect(cache.get('k', 100)?.fingerprint).toBe('fp');
    expect(cache.get('k', 101)).toBeUndefined();
    expect(cache.size).toBe(0); // an expired entry is dropped when it is found
  });

  it('keeps the most recently used entries within maxEntries', () => {
    const cache = new ReplayCache(2);
    cache.set('a', { fingerprint: 'a', expiresAt: 100, response: response() });
    cache.set('b', { fingerprint: 'b', expiresAt: 100, response: response() });
    cache.get('a', 0); // a is now the most recently used
    cache.set('c', { fingerprint: 'c', expiresAt: 100, response: response() });
    expect(cache.get('b', 0)).toBeUndefined();
    expect(cache.get('a', 0)).toBeDefined();
    expect(cache.get('c', 0)).toBeDefined();
  });

  it('counts an entry set again as the most recently used', () => {
    const cache = new ReplayCache(2);
    cache.set('a', { fingerprint: 'a', expiresAt: 100, response: response() });
    cache.set('b', { fingerprint: 'b', expiresAt: 100, response: response() });
    cache.set('a', { fingerprint: 'a', expiresAt: 200, response: response() });
    cache.set('c', { fingerprint: 'c', expiresAt: 100, response: response() });
    expect(cache.get('b', 0)).toBeUndefined();
    expect(cache.get('a', 150)?.expiresAt).toBe(200);
  });

  it('keeps nothing when off, nothing without a body, and nothing over 64 KB', () => {
    const off = new ReplayCache(0);
    off.set('k', { fingerprint: 'fp', expiresAt: 100, response: response() });
    expect(off.size).toBe(0);
    const cache = new ReplayCache(10);
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
    expect([cache.get('omitted', 0), cache.get('large', 0)]).toEqual([undefined, undefined]);
    expect(cache.get('small', 0)).toBeDefined();
  });

  it('keeps a response of exactly 64 KB as JSON, and not one byte more', () => {
    const cache = new ReplayCache(10);
    const overhead = Buffer.byteLength(JSON.stringify(response('')));
    const fits = response('x'.repeat(MAX_CACHED_RESPONSE_BYTES - overhead));
    const over = response('x'.repeat(MAX_CACHED_RESPONSE_BYTES - overhead + 1));
    cache.set('fits', { fingerprint: 'fp', expiresAt: 100, response: fits });
    cache.set('over', { fingerprint: 'fp', expiresAt: 100, response: over });
    expect(cache.get('fits', 0)).toBeDefined();
    expect(cache.get('over', 0)).toBeUndefined();
  });
});
