import { Readable } from 'node:stream';
import { StreamableFile } from '@nestjs/common';
import {
  bufferedFile,
  decodeStoredResponse,
  encodeStoredResponse,
  replayedBody,
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
    ['a BigInt', { amount: BigInt(1) }],
    [
      'a cycle',
      (() => {
        const node: Record<string, unknown> = {};
        node.self = node;
        return node;
      })(),
    ],
    ['an unbuffered StreamableFile', new StreamableFile(Buffer.from('x'))],
    ['a raw stream', Readable.from(['x'])],
  ])('marks %s as not replayable instead of throwing', (_name, value) => {
    expect(storedResult(value)).toEqual({ statusCode: 200, headers: {}, bodyOmitted: true });
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
});
