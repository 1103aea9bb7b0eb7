import { IdempotencyKeyInvalidError } from '../errors/idempotency.errors';
import { parseKeyHeader, validateKey } from './idempotency-key';

describe('parseKeyHeader', () => {
  it.each([
    ['abc', 'abc'],
    ['"abc"', 'abc'],
    ['  abc  ', 'abc'],
    ['550e8400-e29b-41d4-a716-446655440000', '550e8400-e29b-41d4-a716-446655440000'],
    ['k'.repeat(255), 'k'.repeat(255)],
    ['"with spaces inside"', 'with spaces inside'],
    // Quotes are the structured-field string's only when they open and close the value.
    ['a"b"', 'a"b"'],
    ['"a"b', '"a"b'],
  ])('reads %j as the key %j', (header, key) => {
    expect(parseKeyHeader(header)).toBe(key);
  });

  // Node hands header values over as Latin-1 text: the bytes of UTF-8 keys arrive one character per byte.
  const onTheWire = (key: string) => Buffer.from(key, 'utf8').toString('latin1');
  it.each(['ключ-1', 'prix-€', '注文-42', '🛒'.repeat(255), 'naïve café'])('reads the UTF-8 key %j as sent', (key) => {
    expect(parseKeyHeader(onTheWire(key))).toBe(key);
  });

  it('reads bytes that are not UTF-8 as Latin-1', () => {
    expect(parseKeyHeader('caf\u00e9')).toBe('café'); // the single byte 0xE9
  });

  it('refuses C1 control characters and keys over 255 characters however they are encoded', () => {
    expect(() => parseKeyHeader(onTheWire('a\u0085b'))).toThrow('control');
    expect(() => parseKeyHeader(onTheWire('🛒'.repeat(256)))).toThrow('longer than 255');
  });

  it('reports an absent header as no key', () => {
    expect(parseKeyHeader(undefined)).toBeUndefined();
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
    expect(() => parseKeyHeader(header)).toThrow(IdempotencyKeyInvalidError);
    expect(() => parseKeyHeader(header)).toThrow(reason);
  });

  it('refuses a header given as an array, saying it was sent more than once', () => {
    expect(() => parseKeyHeader(['a', 'b'])).toThrow(
      new IdempotencyKeyInvalidError('the header was sent more than once'),
    );
  });
});

describe('validateKey', () => {
  it('accepts numbers from key functions as their decimal text', () => {
    expect(validateKey(12345)).toBe('12345');
  });

  it.each([[{}], [['a']], [Number.NaN], [true]])('refuses %j: the key must be a string', (value) => {
    expect(() => validateKey(value)).toThrow(new IdempotencyKeyInvalidError('the key must be a string'));
  });

  it('treats null and undefined as no key', () => {
    expect(validateKey(undefined)).toBeUndefined();
    expect(validateKey(null)).toBeUndefined();
  });
});
