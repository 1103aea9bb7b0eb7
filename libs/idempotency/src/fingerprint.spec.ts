import { canonicalJson, fingerprintRequest } from './fingerprint';
import { IdempotencyRequestInvalidError } from './idempotency.errors';

describe('canonicalJson', () => {
  it('sorts object keys at every level and keeps array order', () => {
    expect(canonicalJson({ b: { d: 1, c: [3, { z: 1, y: 2 }] }, a: null })).toBe('{"a":null,"b":{"c":[3,{"y":2,"z":1}],"d":1}}');
  });

  it('encodes values the way JSON.stringify sends them', () => {
    const date = new Date(Date.UTC(2026, 0, 1));
    expect(canonicalJson({ date, skipped: undefined, fn: () => 1 })).toBe(`{"date":${JSON.stringify(date)}}`);
    expect(canonicalJson([undefined])).toBe('[null]');
    expect(canonicalJson('text')).toBe('"text"');
  });

  it('refuses bodies nested deeper than 64 levels instead of exhausting the stack', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(() => canonicalJson(deep)).toThrow(IdempotencyRequestInvalidError);
  });
});

describe('fingerprintRequest', () => {
  const base = { method: 'POST', route: '/orders/:id', params: { id: '1' }, query: {}, body: { a: 1, b: 2 } };

  it('is the same for the same request with reordered keys', () => {
    expect(fingerprintRequest(base)).toBe(fingerprintRequest({ ...base, body: { b: 2, a: 1 } }));
    expect(fingerprintRequest(base)).toMatch(/^[0-9a-f]{64}$/);
  });

  it.each([
    ['method', { method: 'PUT' }],
    ['route', { route: '/orders' }],
    ['path parameters', { params: { id: '2' } }],
    ['query', { query: { dryRun: 'true' } }],
    ['body', { body: { a: 1, b: 3 } }],
  ])('changes with the %s', (_, change) => {
    expect(fingerprintRequest({ ...base, ...change })).not.toBe(fingerprintRequest(base));
  });
});
