import fc from 'fast-check';
import { canonicalJson, fingerprintRequest, fingerprintValue } from './fingerprint';
import { recordKey } from './record-key';
import { IdempotencyRequestInvalidError } from '../errors/idempotency.errors';

describe('canonicalJson', () => {
  it('sorts object keys at every level and keeps array order', () => {
    expect(canonicalJson({ b: { d: 1, c: [3, { z: 1, y: 2 }] }, a: null })).toBe(
      '{"a":null,"b":{"c":[3,{"y":2,"z":1}],"d":1}}',
    );
  });

  it('encodes values the way JSON.stringify sends them', () => {
    const date = new Date(Date.UTC(2026, 0, 1));
    expect(canonicalJson({ date, skipped: undefined, fn: () => 1 })).toBe(`{"date":${JSON.stringify(date)}}`);
    expect(canonicalJson([undefined])).toBe('[null]');
    expect(canonicalJson('text')).toBe('"text"');
  });

  it('calls each toJSON once, as JSON.stringify does', () => {
    const toJSON = jest.fn(() => ({ b: 1, a: 2 }));
    expect(canonicalJson({ value: { toJSON } })).toBe('{"value":{"a":2,"b":1}}');
    expect(toJSON).toHaveBeenCalledTimes(1);
  });

  const nested = (levels: number) => {
    let deep: unknown = 1;
    for (let i = 0; i < levels; i++) deep = [deep];
    return deep;
  };

  it('refuses bodies nested deeper than 64 levels instead of exhausting the stack', () => {
    expect(() => canonicalJson(nested(100_000))).toThrow(
      new IdempotencyRequestInvalidError('The request is nested deeper than 64 levels.'),
    );
    expect(() => canonicalJson(nested(65))).toThrow(IdempotencyRequestInvalidError);
  });

  it('reads a value JSON.stringify leaves out as null, as it would send it', () => {
    expect(canonicalJson(undefined)).toBe('null');
    expect(canonicalJson(() => 1)).toBe('null');
  });

  it('accepts a body nested exactly 64 levels deep', () => {
    expect(canonicalJson(nested(64))).toBe(`${'['.repeat(64)}1${']'.repeat(64)}`);
  });

  /** Canonical JSON written out plainly, for JSON values: keys sorted as strings at every level (integer keys too). */
  const reference = (value: unknown): string => {
    if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
    if (value === null || typeof value !== 'object') return JSON.stringify(value);
    const entries = Object.keys(value).sort();
    return `{${entries.map((key) => `${JSON.stringify(key)}:${reference((value as Record<string, unknown>)[key])}`).join(',')}}`;
  };

  it('is the sorted form of any JSON value, keys in order or not, integer-like keys included', () => {
    expect(canonicalJson({ '10': 1, '9': 2, b: 3, a: 4 })).toBe('{"10":1,"9":2,"a":4,"b":3}');
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 2000 },
    );
  });

  it('writes a value taken as it is exactly as the full walk writes it (a left-out member forces the walk)', () => {
    const outcome = (value: unknown) => {
      try {
        return canonicalJson(value);
      } catch (error) {
        return error;
      }
    };
    fc.assert(
      fc.property(fc.anything({ withNullPrototype: true, withSparseArray: true, withBoxedValues: true }), (value) => {
        expect(outcome([value, null])).toEqual(outcome([value, undefined]));
      }),
      { numRuns: 2000 },
    );
  });
});

/**
 * Stored records hold these hashes: a change to the canonical form or the record key would make every retry across
 * a deployment a mismatch (422) or a miss. The expected values were produced by the first released implementation.
 */
describe('stable across versions', () => {
  const body = { b: { d: 1, c: [3, { z: 1, y: 2 }] }, a: null, é: 'ü', '': 0, B: [true, false, -0, 1e21, 0.1] };

  it.each([
    [body, '{"":0,"B":[true,false,0,1e+21,0.1],"a":null,"b":{"c":[3,{"y":2,"z":1}],"d":1},"é":"ü"}'],
    [
      [undefined, () => 1, Symbol('s'), { skip: undefined, f() {} }, new Date(Date.UTC(2026, 0, 1))],
      '[null,null,null,{},"2026-01-01T00:00:00.000Z"]',
    ],
    [
      { buf: Buffer.from('hello'), nested: { toJSON: () => ({ y: 1, x: [Buffer.from([0, 255])] }) } },
      '{"buf":{"$buffer":"aGVsbG8="},"nested":{"x":[{"$buffer":"AP8="}],"y":1}}',
    ],
    [
      // eslint-disable-next-line no-loss-of-precision -- on purpose: the number is hashed as JSON.stringify writes it
      { '\u2028': '\u0000', quote: '"\\', emoji: '😀', lone: '\ud800', num: 12345678901234567890 },
      '{"emoji":"😀","lone":"\\ud800","num":12345678901234567000,"quote":"\\"\\\\","\u2028":"\\u0000"}',
    ],
    ['text', '"text"'],
    [42, '42'],
    [null, 'null'],
  ])('canonical form of %p', (value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it('fingerprint and record key', () => {
    expect(
      fingerprintRequest({ method: 'post', route: '/orders/:id', params: { id: '1' }, query: { a: ['1', '2'] }, body }),
    ).toBe('e33258e514bc4fbef877fc0882f361c3b75a524f1e6df5e254c98a346d5ce8e7');
    expect(recordKey('POST /orders', 'tenant-1', 'key-1')).toBe(
      'POST /orders#01d07c3cd8b45993efbe77106088e93ac59f92cd1a2b6ebc2d87901f89d7e33d',
    );
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

describe('fingerprintValue', () => {
  it.each([
    ['a Set', { items: new Set(['apple']) }, 'a Set'],
    ['a Map', [new Map([['a', 1]])], 'a Map'],
    ['NaN', { amount: NaN }, 'NaN'],
    ['Infinity', [Infinity], 'Infinity'],
    ['an invalid Date', { at: new Date('not a date') }, 'an invalid Date'],
    ['a function', { pay: () => 1 }, 'a function'],
    ['a RegExp', /a/, 'a RegExp'],
  ])('refuses %s, which JSON writes as another value', (_name, value, why) => {
    expect(() => fingerprintValue(value)).toThrow(new RegExp(`holds ${why}`));
  });

  it('takes what JSON tells apart: a valid Date as its ISO text, an absent member as absent', () => {
    const at = new Date('2026-12-04T10:00:00Z');
    expect(fingerprintValue({ at })).toBe(fingerprintValue({ at: '2026-12-04T10:00:00.000Z' }));
    expect(fingerprintValue({ a: 1, coupon: undefined })).toBe(fingerprintValue({ a: 1 }));
  });

  it('gives different fingerprints to different JSON values (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (a, b) => {
        fc.pre(canonicalJson(a) !== canonicalJson(b));
        expect(fingerprintValue(a)).not.toBe(fingerprintValue(b));
      }),
    );
  });
});

describe('request bodies', () => {
  it('hash NaN in a body as JSON sends it (null), as before: only chosen values are strict', () => {
    const input = { method: 'POST', route: '/r' };
    expect(fingerprintRequest({ ...input, body: { a: NaN } })).toBe(
      fingerprintRequest({ ...input, body: { a: null } }),
    );
  });
});
