import { sha256 } from './fingerprint';

/**
 * The record key: where the call applies (`POST /orders`, an RPC pattern, `fn charge-card`, or the route's stable
 * `name`), then a SHA-256 of the caller's scope and key, so raw keys are never stored and one tenant's key never meets
 * another's.
 */
export function recordKey(operation: string, scope: string | undefined, key: string): string {
  return `${operation}#${sha256(JSON.stringify([scope ?? null, key]))}`;
}

/** The partition of every unscoped record in a sort-key layout (after the key prefix). */
export const UNSCOPED_PARTITION = 'unscoped';

/**
 * The partition a record goes to in a table with a sort key: the key prefix and a SHA-256 of the caller's scope, so one
 * tenant's records form one item collection; every unscoped call shares `<prefix>unscoped`.
 */
export function scopePartition(keyPrefix: string, scope: string | undefined): string {
  return `${keyPrefix}${scope === undefined ? UNSCOPED_PARTITION : sha256(JSON.stringify(scope))}`;
}
