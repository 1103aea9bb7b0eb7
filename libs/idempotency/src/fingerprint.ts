import { createHash } from 'node:crypto';
import { IdempotencyRequestInvalidError } from './idempotency.errors';

/** Deeper bodies are refused (400) rather than risking the stack on hostile input. */
const MAX_DEPTH = 64;

export interface FingerprintInput {
  method: string;
  route: string;
  params?: unknown;
  query?: unknown;
  body?: unknown;
}

/** SHA-256 (hex) of the canonical request: same method, route, parameters and JSON body ⇒ same fingerprint. */
export function fingerprintRequest({ method, route, params, query, body }: FingerprintInput): string {
  const canonical = canonicalJson([method.toUpperCase(), route, params ?? null, query ?? null, body ?? null]);
  return sha256(canonical);
}

/**
 * The partition key of a record: where it applies (`POST /orders`, an RPC pattern, `execute`), then a SHA-256 of
 * the caller's scope and key, so raw keys are never stored and one tenant's key never meets another's.
 */
export function recordKey(route: string, scope: string | undefined, key: string): string {
  return `${route}#${sha256(JSON.stringify([scope ?? null, key]))}`;
}

/** SHA-256 (hex) of any JSON value in canonical form: the fingerprint of a programmatic call. */
export function fingerprintValue(value: unknown): string {
  return sha256(canonicalJson(value ?? null));
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * JSON with object keys sorted at every level, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same request.
 * Values become what `JSON.stringify` would send (toJSON, undefined dropped); Buffers hash by content.
 */
export function canonicalJson(value: unknown, depth = 0): string {
  if (depth > MAX_DEPTH) throw new IdempotencyRequestInvalidError(`The request is nested deeper than ${MAX_DEPTH} levels.`);
  if (Buffer.isBuffer(value)) return JSON.stringify({ $buffer: value.toString('base64') });
  const json = toJsonValue(value);
  if (json === null || typeof json !== 'object') return JSON.stringify(json) ?? 'null';
  if (Array.isArray(json)) return `[${json.map((item) => canonicalJson(item, depth + 1)).join(',')}]`;
  const entries = Object.keys(json)
    .filter((key) => toJsonValue((json as Record<string, unknown>)[key]) !== undefined)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((json as Record<string, unknown>)[key], depth + 1)}`);
  return `{${entries.join(',')}}`;
}

function toJsonValue(value: unknown): unknown {
  const withToJson = value as { toJSON?: () => unknown } | null;
  if (withToJson !== null && typeof withToJson === 'object' && typeof withToJson.toJSON === 'function') {
    return withToJson.toJSON();
  }
  return typeof value === 'function' || typeof value === 'symbol' ? undefined : value;
}
