import { Readable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import { StreamableFile } from '@nestjs/common';
import { COMPRESS_RESPONSE_ABOVE_BYTES } from '../idempotency.constants';
import { BinaryBodyType, OmittedReason, StoredResponse } from '../repository/idempotency.record';
import { binaryValue } from './binary-values';
import { decodeTyped, encodeTyped } from './typed-value';

type StoredBody = Pick<
  StoredResponse,
  'body' | 'bodyBase64' | 'bodyType' | 'fileOptions' | 'bodyOmitted' | 'omittedBecause'
>;

/** A body not stored, and why. */
export function omitted(omittedBecause: OmittedReason): { bodyOmitted: true; omittedBecause: OmittedReason } {
  return { bodyOmitted: true, omittedBecause };
}

/**
 * The body of a result as it will be stored: the JSON the client receives (Dates as strings, `toJSON` applied),
 * binary values as base64 with their type, `undefined` as no body. Values that cannot be replayed faithfully
 * (a raw stream, BigInt, a cycle) are `bodyOmitted`: the work is done, so it is never run again for them.
 * A `StreamableFile` must have been buffered first (`bufferedFile`).
 */
export function storableBody(value: unknown): StoredBody {
  if (value instanceof StreamableFile) {
    const bytes = fileBytes.get(value);
    if (!bytes) return omitted('stream');
    return { bodyBase64: bytes.toString('base64'), bodyType: 'StreamableFile', fileOptions: { ...value.options } };
  }
  if (Buffer.isBuffer(value)) return { bodyBase64: value.toString('base64') };
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) {
    const bytes = ArrayBuffer.isView(value)
      ? Buffer.from(value.buffer, value.byteOffset, value.byteLength)
      : Buffer.from(value as ArrayBuffer);
    return { bodyBase64: bytes.toString('base64'), bodyType: value.constructor.name as BinaryBodyType };
  }
  if (typeof (value as { pipe?: unknown } | null)?.pipe === 'function') return omitted('stream');
  if (value === undefined) return {};
  try {
    const copy = plainCopy(value, 0);
    return { body: copy !== NOT_PLAIN ? copy : JSON.parse(JSON.stringify(value) ?? 'null') };
  } catch {
    return omitted('not-json');
  }
}

/** What `plainCopy` answers for a value that only `JSON.stringify` can say how to send. */
const NOT_PLAIN = Symbol('not plain JSON');
const PLAIN_DEPTH = 64;

/**
 * A copy of a value that is plain JSON data already (plain objects and arrays of strings, numbers, booleans and null,
 * as a parsed body is), equal to what `JSON.parse(JSON.stringify(value))` gives and several times faster; `NOT_PLAIN`
 * for anything else (a class instance, a Date, `toJSON`, `undefined`, a hole, an own `__proto__` key, deep nesting).
 */
function plainCopy(value: unknown, depth: number): unknown {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value + 0 : null; // -0 is sent as 0, NaN as null
  if (typeof value !== 'object' || depth > PLAIN_DEPTH) return NOT_PLAIN;
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === Array.prototype) {
    const list = value as unknown[];
    const copy = new Array<unknown>(list.length);
    for (let i = 0; i < list.length; i++) {
      const item = plainCopy(list[i], depth + 1);
      if (item === NOT_PLAIN) return NOT_PLAIN;
      copy[i] = item;
    }
    return copy;
  }
  if (prototype !== Object.prototype && prototype !== null) return NOT_PLAIN;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const item = plainCopy((value as Record<string, unknown>)[key], depth + 1);
    if (item === NOT_PLAIN || key === '__proto__') return NOT_PLAIN;
    copy[key] = item;
  }
  return copy;
}

/** The bytes of the `StreamableFile`s made by `bufferedFile`, so that they can be both sent and stored. */
const fileBytes = new WeakMap<StreamableFile, Buffer>();

/**
 * Reads a `StreamableFile` into memory and hands back an equivalent one (same options) that sends those bytes:
 * the stream can only be read once, and the replay must send the same bytes.
 */
export async function bufferedFile(file: StreamableFile): Promise<StreamableFile> {
  const chunks: Buffer[] = [];
  for await (const chunk of file.getStream() as Readable) chunks.push(Buffer.from(chunk));
  const bytes = Buffer.concat(chunks);
  const buffered = new StreamableFile(bytes, file.options);
  fileBytes.set(buffered, bytes);
  return buffered;
}

/** A GraphQL resolver's output, stored as a 200 with no headers: the JSON it is sent as. */
export function storedResult(value: unknown): StoredResponse {
  return { statusCode: 200, headers: {}, ...storableBody(value) };
}

/**
 * A function's or a message handler's result, stored as a 200 with no headers in the typed encoding, so that a
 * replay hands back the types the first call returned (a `Date`, a `Map`, a `BigInt`). Throws
 * `UnrecordableValueError` for a value it cannot record (a function, a cycle), naming where it is; a raw stream is
 * `bodyOmitted`.
 */
export function storedTypedResult(value: unknown): StoredResponse {
  if (typeof (value as { pipe?: unknown } | null)?.pipe === 'function') {
    return { statusCode: 200, headers: {}, ...omitted('stream') };
  }
  return { statusCode: 200, headers: {}, body: encodeTyped(value, 'result'), bodyEncoding: 'typed' };
}

/**
 * The value to hand back on a replay, of the type the first response was: a copy, so that whatever happens to it
 * downstream (an outer interceptor that edits the response) cannot change what the next replay returns.
 */
export function replayedBody(stored: StoredResponse): unknown {
  if (stored.bodyEncoding === 'typed') return decodeTyped(stored.body);
  if (stored.bodyBase64 !== undefined) return binaryBody(Buffer.from(stored.bodyBase64, 'base64'), stored);
  return copyJson(stored.body);
}

/**
 * A copy of JSON data, which a stored body always is (`storableBody` and the store both hand out parsed JSON): several
 * times faster than `structuredClone` on it. A `__proto__` key stays an own property, as `JSON.parse` made it.
 */
function copyJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copyJson);
  if (value === null || typeof value !== 'object') return value;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const item = copyJson((value as Record<string, unknown>)[key]);
    if (key === '__proto__') Object.defineProperty(copy, key, { value: item, enumerable: true, writable: true });
    else copy[key] = item;
  }
  return copy;
}

function binaryBody(bytes: Buffer, stored: StoredResponse): unknown {
  const type = stored.bodyType ?? 'Buffer';
  if (type === 'Buffer') return bytes;
  if (type === 'StreamableFile') return new StreamableFile(bytes, stored.fileOptions);
  const value = binaryValue(type, bytes);
  if (value === undefined) throw new TypeError(`a stored body has an unknown binary type: ${type}`);
  return value;
}

/** The `response` attribute: JSON text (S), gzipped JSON (B) once it is large. */
export function encodeStoredResponse(response: StoredResponse): string | Uint8Array {
  const json = JSON.stringify(response);
  const bytes = Buffer.byteLength(json);
  jsonBytes.set(response, bytes);
  return bytes > COMPRESS_RESPONSE_ABOVE_BYTES ? gzipSync(json) : json;
}

/**
 * The size of a response as JSON, in bytes. A captured response is not changed afterwards, so the size measured when
 * it was stored is reused (the replay cache asks right after the completion): one serialization fewer per request.
 */
export function storedResponseBytes(response: StoredResponse): number {
  let bytes = jsonBytes.get(response);
  if (bytes === undefined) {
    bytes = Buffer.byteLength(JSON.stringify(response));
    jsonBytes.set(response, bytes);
  }
  return bytes;
}

const jsonBytes = new WeakMap<StoredResponse, number>();

export function decodeStoredResponse(value: string | Uint8Array): StoredResponse {
  const json = typeof value === 'string' ? value : gunzipSync(value).toString('utf8');
  return JSON.parse(json) as StoredResponse;
}

export function encodedByteLength(value: string | Uint8Array): number {
  return typeof value === 'string' ? Buffer.byteLength(value) : value.byteLength;
}
