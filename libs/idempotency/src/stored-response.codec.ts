import { gunzipSync, gzipSync } from 'node:zlib';
import { COMPRESS_RESPONSE_ABOVE_BYTES } from './idempotency.constants';
import { StoredResponse } from './idempotency.record';

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
