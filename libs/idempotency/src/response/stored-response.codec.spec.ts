import { Readable } from 'node:stream';
import { StreamableFile } from '@nestjs/common';
import fc from 'fast-check';
import {
  bufferedFile,
  decodeStoredResponse,
  encodeStoredResponse,
  replayedBody,
  storableBody,
  storedResult,
} from './stored-response.codec';

/** What a replay hands back after a round trip through the stored attribute. */
const roundTrip = (value: unknown) => replayedBody(decodeStoredResponse(encodeStoredResponse(storedResult(value))));

describe('stored response codec', () => {
  it.each([
    ['Uint8Array', new Uint8Array([0, 1, 255])],
    ['Int16Array', new Int16Array([-2, 300])],
    ['Float32Array', new Float32Array([1.5, -2])],
    ['Float64Array', new Float64Array([Math.PI])],
    ['BigInt64Array', new BigInt64Array([BigInt(-5)])],
  ])('replays a %s as the same type with the same bytes', (type, value) => {
    const replayed = roundTrip(value) as ArrayBufferView;
    expect(replayed.constructor.name).toBe(type);
    expect(Buffer.from(replayed.buffer, replayed.byteOffset, replayed.byteLength)).toEqual(
      Buffer.from(value.buffer, value.byteOffset, value.byteLength),
    );
  });

  it('replays a view into a larger buffer as just its own bytes', () => {
    const backing = new Uint8Array([9, 9, 1, 2, 9]);
    const replayed = roundTrip(new Uint8Array(backing.buffer, 2, 2)) as Uint8Array;
    expect([...replayed]).toEqual([1, 2]);
  });

  it('replays an ArrayBuffer, a DataView and a Buffer as themselves', () => {
    const arrayBuffer = roundTrip(new Uint8Array([4, 5]).buffer);
    expect(Object.prototype.toString.call(arrayBuffer)).toBe('[object ArrayBuffer]');
    expect([...new Uint8Array(arrayBuffer as ArrayBuffer)]).toEqual([4, 5]);
    const view = roundTrip(new DataView(new Uint8Array([6]).buffer)) as DataView;
    expect(view.constructor.name).toBe('DataView');
    expect(view.getUint8(0)).toBe(6);
    expect(Buffer.isBuffer(roundTrip(Buffer.from('x')))).toBe(true);
  });

  it('replays a buffered StreamableFile with its bytes and options', async () => {
    const file = await bufferedFile(
      new StreamableFile(Readable.from([Buffer.from('a,b\n')]), { type: 'text/csv', disposition: 'attachment' }),
    );
    const replayed = roundTrip(file) as StreamableFile;
    expect(replayed).toBeInstanceOf(StreamableFile);
    expect(replayed.getHeaders()).toMatchObject({ type: 'text/csv', disposition: 'attachment' });
    const chunks: Buffer[] = [];
    for await (const chunk of replayed.getStream()) chunks.push(Buffer.from(chunk));
    expect(Buffer.concat(chunks).toString()).toBe('a,b\n');
  });

  it.each([
    ['a BigInt', { amount: BigInt(1) }, 'not-json'],
    [
      'a cycle',
      (() => {
        const node: Record<string, unknown> = {};
        node.self = node;
        return node;
      })(),
      'not-json',
    ],
    ['an unbuffered StreamableFile', new StreamableFile(Buffer.from('x')), 'stream'],
    ['a raw stream', Readable.from(['x']), 'stream'],
  ])('marks %s as not replayable instead of throwing, with its reason', (_name, value, omittedBecause) => {
    expect(storedResult(value)).toEqual({ statusCode: 200, headers: {}, bodyOmitted: true, omittedBecause });
  });

  it('keeps falsy bodies exactly', () => {
    for (const value of [false, 0, '', null]) expect(roundTrip(value)).toBe(value);
    expect(roundTrip(undefined)).toBeUndefined();
  });

  it('hands each replay its own copy of an object body, so an edit downstream cannot reach the next replay', () => {
    const stored = storedResult({ order: { id: '1', lines: [1, 2] } });
    const first = replayedBody(stored) as { order: { id: string } };
    first.order.id = 'edited downstream';
    expect(replayedBody(stored)).toEqual({ order: { id: '1', lines: [1, 2] } });
    expect(replayedBody(stored)).not.toBe(replayedBody(stored));
  });

  it('replays a `__proto__` key as the own property JSON made it, never as a prototype', () => {
    const body = JSON.parse('{"__proto__": {"admin": true}, "list": [{"__proto__": 1}]}');
    const replayed = replayedBody({ statusCode: 200, headers: {}, body }) as Record<string, unknown>;
    expect(Object.getPrototypeOf(replayed)).toBe(Object.prototype);
    expect((replayed as { admin?: boolean }).admin).toBeUndefined();
    expect(JSON.stringify(replayed)).toBe('{"__proto__":{"admin":true},"list":[{"__proto__":1}]}');
  });

  describe('a body as stored is what JSON.stringify sends', () => {
    /** What the client receives: the JSON text, parsed; or no body when it cannot be serialized. */
    const asSent = (value: unknown) => {
      try {
        return { body: JSON.parse(JSON.stringify(value) ?? 'null') as unknown };
      } catch {
        return { bodyOmitted: true, omittedBecause: 'not-json' };
      }
    };
    class Order {
      constructor(readonly id = '1') {}
      get total() {
        return 2;
      }
    }
    const deep: Record<string, unknown> = {};
    let level = deep;
    for (let i = 0; i < 80; i++) level = (level.next = {}) as Record<string, unknown>;
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;

    it.each([
      ['plain data', { ok: true, lines: [1, 'two', null, { nested: [false] }] }],
      ['-0, NaN and Infinity', { zero: -0, list: [-0, NaN, Infinity], top: -Infinity }],
      ['undefined members and holes', { gone: undefined, list: [undefined, , 3] }], // eslint-disable-line no-sparse-arrays
      ['a Date and a toJSON', { at: new Date(0), custom: { toJSON: () => 'custom' } }],
      ['a class instance', { order: new Order() }],
      ['a null-prototype object', Object.assign(Object.create(null), { a: 1 })],
      ['an own __proto__ key', JSON.parse('{"__proto__": {"admin": true}}')],
      ['nesting deeper than the fast path goes', deep],
      ['a BigInt', { big: BigInt(1) }],
      ['a cycle', cycle],
    ])('%s', (_name, value) => {
      expect(storableBody(value)).toStrictEqual(asSent(value));
    });

    it('for any value', () => {
      const values = fc.anything({
        withNullPrototype: true,
        withBoxedValues: true,
        withDate: true,
        withSparseArray: true,
        withMap: true,
        withSet: true,
        withBigInt: true,
      });
      fc.assert(
        fc.property(
          values.filter((value) => value !== undefined),
          (value) => {
            const stored = storableBody(value);
            expect(stored).toStrictEqual(asSent(value));
            expect(JSON.stringify(stored)).toBe(JSON.stringify(asSent(value)));
          },
        ),
        { numRuns: 2000 },
      );
    });
  });
});
