import { parseKeyHeader, validateKey } from './idempotency-key';

describe('parseKeyHeader', () => {
  it.each([
    ['abc', 'abc'],
    ['"abc"', 'abc'],
    ['  abc  ', 'abc'],
    ['550e8400-e29b-41d4-a716-446655440000', '550e8400-e29b-41d4-a716-446655440000'],
    ['k'.repeat(255), 'k'.repeat(255)],
    ['"with spaces inside"', 'with spaces inside'],
  ])('reads %j as the key %j', (header, key) => {
    expect(parseKeyHeader(header)).toEqual({ outcome: 'present', key });
  });

  it('reports an absent header as missing', () => {
    expect(parseKeyHeader(undefined)).toEqual({ outcome: 'missing' });
  });

  it.each([
    ['', 'empty'],
    ['""', 'empty'],
    ['k'.repeat(256), 'longer than 255'],
    ['a\u0000b', 'control'],
    ['a\tb', 'control'],
    ['a\u007fb', 'control'],
    ['a, b', 'list'],
    ['"a", "b"', 'list'],
    ['"a"b"', 'list'],
  ])('refuses %j (%s)', (header, reason) => {
    expect(parseKeyHeader(header)).toEqual({ outcome: 'invalid', reason: expect.stringContaining(reason) });
  });

  it('refuses a header given as an array', () => {
    expect(parseKeyHeader(['a', 'b'])).toMatchObject({ outcome: 'invalid' });
  });
});

describe('validateKey', () => {
  it('accepts numbers from key functions as their decimal text', () => {
    expect(validateKey(12345)).toEqual({ outcome: 'present', key: '12345' });
  });

  it.each([[{}], [['a']], [Number.NaN], [true]])('refuses %j', (value) => {
    expect(validateKey(value)).toMatchObject({ outcome: 'invalid' });
  });

  it('treats null and undefined as no key', () => {
    expect(validateKey(undefined)).toEqual({ outcome: 'missing' });
    expect(validateKey(null)).toEqual({ outcome: 'missing' });
  });
});
