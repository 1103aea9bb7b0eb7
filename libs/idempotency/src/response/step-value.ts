import { gzipSync } from 'node:zlib';
import { COMPRESS_RESPONSE_ABOVE_BYTES, STEP_ENTRY_OVERHEAD_BYTES } from '../idempotency.constants';
import { StoredResponse } from '../repository/idempotency.record';
import { encodedByteLength } from './stored-response.codec';

const values = new WeakMap<StoredResponse, string | Uint8Array>();

/**
 * A step's result as the record keeps it: its sealed envelope (`encryption`), else its typed JSON, gzipped above
 * 0.7 KB. Worked out once per result: the journal measures it, then the store writes it.
 */
export function stepValue(result: StoredResponse): string | Uint8Array {
  if (result.sealed !== undefined) return result.sealed;
  let value = values.get(result);
  if (value === undefined) {
    const json = JSON.stringify(result.body);
    value = Buffer.byteLength(json) > COMPRESS_RESPONSE_ABOVE_BYTES ? gzipSync(json) : json;
    values.set(result, value);
  }
  return value;
}

/**
 * What a step takes of its record, as DynamoDB counts an item (every attribute's name and value, UTF-8, nested maps
 * included): its name, its stored result, and its entry's own attributes (at most `STEP_ENTRY_OVERHEAD_BYTES`). The
 * limits on steps apply to this count, the same on every store.
 */
export function stepEntryBytes(name: string, result: StoredResponse): number {
  return Buffer.byteLength(stepKey(name)) + STEP_ENTRY_OVERHEAD_BYTES + encodedByteLength(stepValue(result));
}

/**
 * The key `__proto__` is stored under in a record's `steps` map: one no step name can be (256 characters; names have at
 * most 255). The AWS SDK cannot read a map key `__proto__` in the item of an error's answer (a failed condition's old
 * record: every duplicate's claim would fail as a store fault), and dynalite drops it.
 */
const PROTO_STEP_KEY = '__proto__'.padEnd(256, '_');

/** A step's key in the record's `steps` map: its name, but for `__proto__` (`PROTO_STEP_KEY`). */
export function stepKey(name: string): string {
  return name === '__proto__' ? PROTO_STEP_KEY : name;
}

/** The step name a key of the `steps` map stands for (the inverse of `stepKey`; a plain `__proto__` reads as itself). */
export function stepNameOf(key: string): string {
  return key === PROTO_STEP_KEY ? '__proto__' : key;
}
