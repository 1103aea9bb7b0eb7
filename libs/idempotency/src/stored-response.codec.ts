import { gunzipSync, gzipSync } from 'node:zlib';
import { StreamableFile } from '@nestjs/common';
import { COMPRESS_RESPONSE_ABOVE_BYTES } from './idempotency.constants';
import { StoredResponse } from './idempotency.record';

type StoredBody = Pick<StoredResponse, 'body' | 'bodyBase64'>;

/**
 * The body of a result as it will be stored: the JSON the client receives (Dates as strings, `toJSON` applied),
 * Buffers as base64, `undefined` as no body. Undefined when it cannot be replayed faithfully: streams, and
 * values JSON cannot represent (BigInt, cycles).
 */
export function storableBody(value: unknown): StoredBody | undefined {
  if (value instanceof StreamableFile || typeof (value as { pipe?: unknown } | null)?.pipe === 'function') return undefined;
  if (Buffer.isBuffer(value)) return { bodyBase64: value.toString('base64') };
  if (value === undefined) return {};
  try {
    return { body: JSON.parse(JSON.stringify(value) ?? 'null') };
  } catch {
    return undefined;
  }
}

/** A result that is not an HTTP response (a function's, a message handler's), stored as a 200 with no headers. */
export function storedResult(value: unknown): StoredResponse | undefined {
  const body = storableBody(value);
  return body && { statusCode: 200, headers: {}, ...body };
}

/**
 * The value to hand back on a replay: a copy, so that whatever happens to it downstream (an outer interceptor
 * that edits the response) cannot change what the next replay of a cached record returns.
 */
export function replayedBody(stored: StoredResponse): unknown {
  if (stored.bodyBase64 !== undefined) return Buffer.from(stored.bodyBase64, 'base64');
  return stored.body !== null && typeof stored.body === 'object' ? structuredClone(stored.body) : stored.body;
}

/** The `response` attribute: JSON text (S), gzipped JSON (B) once it is large. */
export function encodeStoredResponse(response: StoredResponse): string | Uint8Array {
  const json = JSON.stringify(response);
  return Buffer.byteLength(json) > COMPRESS_RESPONSE_ABOVE_BYTES ? gzipSync(json) : json;
}

export function decodeStoredResponse(value: string | Uint8Array): StoredResponse {
  const json = typeof value === 'string' ? value : gunzipSync(value).toString('utf8');
  return JSON.parse(json) as StoredResponse;
}

export function encodedByteLength(value: string | Uint8Array): number {
  return typeof value === 'string' ? Buffer.byteLength(value) : value.byteLength;
}
