import { sha256 } from './fingerprint';

/**
 * The record key: where the call applies (`POST /orders`, an RPC pattern, `fn charge-card`, or the route's stable
 * `name`), then a SHA-256 of the caller's scope and key, so raw keys are never stored and one tenant's key never meets
 * another's.
 */
export function recordKey(operation: string, scope: string | undefined, key: string): string {
  return `${operation}#${sha256(JSON.stringify([scope ?? null, key]))}`;
}

/**
 * A scope as it enters the record key: text. A number (an auto-increment user id) or a bigint is written as its decimal
 * text, so `--scope 42` finds what `request.user.id === 42` wrote; nothing (`undefined`, `null`) is no scope. Anything
 * else (an object, a boolean) is refused with a `TypeError` saying so: two users' objects must never hash alike by
 * accident. Records written before 0.2 with a numeric scope were keyed by the number itself (docs/keys-and-fingerprints.md).
 */
export function scopeText(scope: unknown): string | undefined {
  if (scope === undefined || scope === null || typeof scope === 'string') return scope ?? undefined;
  if ((typeof scope === 'number' && Number.isFinite(scope)) || typeof scope === 'bigint') return String(scope);
  throw new TypeError(`a scope must be a string or a number, got ${describeValue(scope)}`);
}

function describeValue(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/**
 * What every record key the module writes ends with: `#` and a SHA-256 (hex). A listing or a sweep of a shared table
 * touches only items whose key has this shape (after the key prefix): never another entity's.
 */
export const RECORD_KEY_SHAPE = /#[0-9a-f]{64}$/;

/** The partition of every unscoped record in a sort-key layout (after the key prefix). */
export const UNSCOPED_PARTITION = 'unscoped';

/**
 * The partition a record goes to in a table with a sort key: the key prefix and a SHA-256 of the caller's scope, so one
 * tenant's records form one item collection; every unscoped call shares `<prefix>unscoped`.
 */
export function scopePartition(keyPrefix: string, scope: string | undefined): string {
  return `${keyPrefix}${scope === undefined ? UNSCOPED_PARTITION : sha256(JSON.stringify(scope))}`;
}
