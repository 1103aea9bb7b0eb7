import fc from 'fast-check';
import { decodeTyped, encodeTyped, UnrecordableValueError } from './typed-value';

/** Jest finds no two invalid dates equal; a round trip must keep them invalid dates. */
type Tester = (a: unknown, b: unknown) => boolean | undefined;
(expect as unknown as { addEqualityTesters(testers: Tester[]): void }).addEqualityTesters([
  (a, b) =>
    a instanceof Date && b instanceof Date && Number.isNaN(a.getTime()) ? Number.isNaN(b.getTime()) : undefined,
]);

/** Recorded, stored as JSON text, read back: what a record does to the value. */
const roundTrip = (value: unknown) => decodeTyped(JSON.parse(JSON.stringify(encodeTyped(value))));

describe('the typed encoding of recorded values', () => {
  it('brings back any value of the supported kinds, of the same types', () => {
    const value = fc.anything({
      withBigInt: true,
      withDate: true,
      withMap: true,
      withSet: true,
      withTypedArray: true,
      withSparseArray: false,
      withNullPrototype: false,
      withBoxedValues: false,
      withObjectString: false,
    });
    fc.assert(
      fc.property(value, (v) => expect(roundTrip(v)).toStrictEqual(v)),
      { numRuns: 2000 },
    );
  });

  it('brings back the values JSON loses: -0, NaN, ±Infinity, undefined members and elements, invalid dates', () => {
    const value = {
      zero: -0,
      nan: Number.NaN,
      up: Infinity,
      down: -Infinity,
      absent: undefined,
      list: [undefined, 1],
      at: new Date(Date.UTC(2026, 0, 1)),
      big: 2n ** 70n,
    };
    const back = roundTrip(value) as typeof value;
    expect(back).toStrictEqual(value);
    expect(Object.is(back.zero, -0)).toBe(true);
    expect('absent' in back).toBe(true);
    expect(roundTrip(undefined)).toBeUndefined();
    expect(roundTrip(new Date(Number.NaN))).toStrictEqual(new Date(Number.NaN));
    expect(roundTrip(new Date(Number.NaN))).not.toStrictEqual(new Date(0));
  });

  it('brings back binary values as their own types, and Map and Set with any keys', () => {
    const value = {
      buffer: Buffer.from('hi'),
      bytes: new Uint8Array([1, 2, 3]),
      floats: new Float64Array([1.5, Number.NaN]),
      raw: new Uint8Array([9, 8]).buffer,
      view: new DataView(new Uint8Array([7]).buffer),
      map: new Map<unknown, unknown>([
        [{ id: 1 }, new Set([1n])],
        [new Date(0), 'epoch'],
      ]),
    };
    const back = roundTrip(value) as typeof value;
    expect(back).toStrictEqual(value);
    expect(Buffer.isBuffer(back.buffer)).toBe(true);
    expect(Buffer.isBuffer(back.bytes)).toBe(false);
  });

  it('never reads data as a tag: an object with its own $type member comes back as it was', () => {
    const value = { $type: 'Date', value: 'not a date', nested: [{ $type: 'undefined' }] };
    expect(roundTrip(value)).toStrictEqual(value);
  });

  it('records other class instances as JSON sends them: toJSON, else their own members, as plain objects', () => {
    class Money {
      constructor(
        readonly amount: number,
        readonly currency: string,
      ) {}
    }
    class Decimal {
      toJSON() {
        return '10.50';
      }
    }
    expect(roundTrip({ price: new Money(10, 'EUR'), exact: new Decimal() })).toStrictEqual({
      price: { amount: 10, currency: 'EUR' },
      exact: '10.50',
    });
  });

  it('records an object whose toJSON returns the object itself by its members, as JSON.stringify does (not a cycle)', () => {
    class Selfish {
      readonly id = 7;
      toJSON() {
        return this;
      }
    }
    const literal = { name: 'x', toJSON: () => literal };
    expect(roundTrip({ a: new Selfish(), b: literal })).toStrictEqual({ a: { id: 7 }, b: { name: 'x' } });
    expect(roundTrip({ a: new Selfish(), b: literal })).toStrictEqual(
      JSON.parse(JSON.stringify({ a: new Selfish(), b: literal })),
    );
  });

  it('keeps an own __proto__ member as a member, never as the prototype', () => {
    const value = JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, unknown>;
    const back = roundTrip(value) as Record<string, unknown>;
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.keys(back)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('refuses functions, symbols, cycles and nesting past 256 levels, naming where they are', () => {
    const cycle: Record<string, unknown> = { a: [] };
    (cycle.a as unknown[]).push(cycle);
    let deep: unknown = 1;
    for (let i = 0; i < 300; i++) deep = [deep];
    expect(() => encodeTyped({ charge: { refund: () => 1 } }, 'result')).toThrow(
      new UnrecordableValueError('result.charge.refund is a function, which cannot be recorded'),
    );
    expect(() => encodeTyped([Symbol('x')], 'result')).toThrow('result[0] is a symbol');
    expect(() => encodeTyped(cycle, 'result')).toThrow('result.a[0] refers to an object that contains it (a cycle)');
    expect(() => encodeTyped(deep, 'result')).toThrow('nested more than 256 levels deep');
  });

  it('records the same object twice when it is not a cycle', () => {
    const shared = { id: 1 };
    expect(roundTrip({ a: shared, b: shared })).toStrictEqual({ a: { id: 1 }, b: { id: 1 } });
  });

  it('refuses a tag it does not know', () => {
    expect(() => decodeTyped({ $type: 'Temporal', value: 'x' })).toThrow('unknown type tag: Temporal');
  });
});
