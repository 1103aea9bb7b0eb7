import * as crypto from 'node:crypto';
import { IdempotencyRequestInvalidError } from '../errors/idempotency.errors';

/** Deeper bodies are refused (400) rather than risking the stack on hostile input. */
export const MAX_FINGERPRINT_DEPTH = 64;
const MAX_DEPTH = MAX_FINGERPRINT_DEPTH;

export interface FingerprintInput {
  method: string;
  route: string;
  params?: unknown;
  query?: unknown;
  body?: unknown;
  /** Uploaded files kept beside the body (multer's `req.file` / `req.files`), as digests. */
  files?: unknown;
}

/**
 * SHA-256 (hex) of the canonical request: same method, route, parameters, JSON body and files ⇒ same fingerprint. A
 * request without files hashes exactly as before files were fingerprinted, so stored records stay comparable.
 */
export function fingerprintRequest({ method, route, params, query, body, files }: FingerprintInput): string {
  const parts = [method.toUpperCase(), route, params ?? null, query ?? null, body ?? null];
  if (files !== undefined) parts.push(files);
  return sha256(canonicalJson(parts));
}

/**
 * SHA-256 (hex) of any JSON value in canonical form: the fingerprint of a programmatic call, a message, a route's own
 * `fingerprint` function. A value JSON cannot tell apart from another (a Set, a Map, NaN, an invalid Date, a function)
 * is refused with a TypeError: two different requests would share one fingerprint.
 */
export function fingerprintValue(value: unknown): string {
  return sha256(canonicalJson(value ?? null, 0, true));
}

/** Node's one-shot `crypto.hash` (20.12 and later): the same digest without a Hash object per call. */
const oneShotHash = (crypto as { hash?: typeof crypto.hash }).hash;

export function sha256(text: string): string {
  return oneShotHash ? oneShotHash('sha256', text, 'hex') : crypto.createHash('sha256').update(text).digest('hex');
}

/**
 * JSON with object keys sorted at every level, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same request.
 * Values become what `JSON.stringify` would send (toJSON, undefined dropped); Buffers hash by content.
 */
export function canonicalJson(value: unknown, depth = 0, strict = false): string {
  return canonicalAsIs(value, depth) ? JSON.stringify(value) : (canonical(value, depth, strict) ?? 'null');
}

/**
 * Whether `JSON.stringify` already writes `value` in canonical form, in one native pass: strings, numbers, booleans and
 * null, in arrays and plain objects whose keys are in order, within the depth limit. Anything else (a `toJSON`, a
 * Buffer, a value left out, keys out of order) is walked by `canonical`, which may also refuse it.
 */
function canonicalAsIs(value: unknown, depth: number): boolean {
  if (depth > MAX_DEPTH) return false;
  if (typeof value !== 'object')
    return typeof value === 'string' || typeof value === 'boolean' || Number.isFinite(value);
  if (value === null) return true;
  const prototype = Object.getPrototypeOf(value);
  if (prototype === Array.prototype) {
    const array = value as unknown[];
    if ((array as { toJSON?: unknown }).toJSON !== undefined) return false;
    for (let i = 0; i < array.length; i++) if (!canonicalAsIs(array[i], depth + 1)) return false;
    return true;
  }
  if (prototype !== Object.prototype && prototype !== null) return false;
  const keys = Object.keys(value);
  if (!inOrder(keys)) return false;
  for (const key of keys) {
    if (key === 'toJSON' || !canonicalAsIs((value as Record<string, unknown>)[key], depth + 1)) return false;
  }
  return true;
}

/**
 * One pass over the value (each `toJSON` called once); undefined for what `JSON.stringify` leaves out. `strict`: what
 * JSON would write as another value (NaN as null, a Set as {}) or leave out (a function) is refused.
 */
function canonical(value: unknown, depth: number, strict: boolean): string | undefined {
  if (depth > MAX_DEPTH)
    throw new IdempotencyRequestInvalidError(`The request is nested deeper than ${MAX_DEPTH} levels.`);
  if (strict) refuseAmbiguous(value);
  if (typeof value !== 'object' || value === null) {
    return typeof value === 'function' || typeof value === 'symbol' ? undefined : JSON.stringify(value);
  }
  if (Buffer.isBuffer(value)) return `{"$buffer":${JSON.stringify(value.toString('base64'))}}`;
  const json = toJsonValue(value);
  if (json === null || typeof json !== 'object') return JSON.stringify(json);
  let out: string;
  if (Array.isArray(json)) {
    out = '[';
    for (let i = 0; i < json.length; i++) out += `${i ? ',' : ''}${canonical(json[i], depth + 1, strict) ?? 'null'}`;
    return `${out}]`;
  }
  const keys = Object.keys(json);
  if (keys.length === 0) return '{}';
  out = '';
  for (const key of inOrder(keys) ? keys : keys.sort()) {
    const member = canonical((json as Record<string, unknown>)[key], depth + 1, strict);
    if (member !== undefined) out += `${out ? ',' : ''}${JSON.stringify(key)}:${member}`;
  }
  return `{${out}}`;
}

/** Objects whose contents JSON does not write: each would hash as `{}`, whatever it holds. */
const OPAQUE: readonly [new (...args: never[]) => object, string][] = [
  [Set, 'a Set (return [...set].sort() for one whose order does not count)'],
  [Map, 'a Map (return Object.fromEntries(map))'],
  [WeakSet, 'a WeakSet'],
  [WeakMap, 'a WeakMap'],
  [RegExp, 'a RegExp (return its source)'],
  [Promise, 'a promise'],
  [Error, 'an Error'],
];

/** A value two different requests could share a fingerprint through, refused by name. */
function refuseAmbiguous(value: unknown): void {
  let what: string | undefined;
  if (typeof value === 'number' && !Number.isFinite(value)) what = `${value} (JSON writes it as null)`;
  else if (typeof value === 'function' || typeof value === 'symbol') what = `a ${typeof value} (JSON leaves it out)`;
  else if (value instanceof Date && Number.isNaN(value.getTime())) what = 'an invalid Date (JSON writes it as null)';
  else if (typeof value === 'object' && value !== null) what = OPAQUE.find(([type]) => value instanceof type)?.[1];
  if (what !== undefined) {
    throw new TypeError(`the fingerprint's value holds ${what}: two different requests would share one fingerprint`);
  }
}

/** Keys already sorted (a client that sends them in order, a single key) need no sort, which allocates. */
function inOrder(keys: string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (keys[i - 1] > keys[i]) return false;
  return true;
}

function toJsonValue(value: unknown): unknown {
  const withToJson = value as { toJSON?: () => unknown } | null;
  if (withToJson !== null && typeof withToJson === 'object' && typeof withToJson.toJSON === 'function') {
    return withToJson.toJSON();
  }
  return typeof value === 'function' || typeof value === 'symbol' ? undefined : value;
}
