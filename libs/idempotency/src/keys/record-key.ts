import { sha256 } from './fingerprint';

/**
 * The record key: where the call applies (`POST /orders`, an RPC pattern, `fn charge-card`, or the route's stable
 * `name`), then a SHA-256 of the caller's scope and key, so raw keys are never stored and one tenant's key never meets
 * another's.
 */
export function recordKey(operation: string, scope: string | undefined, key: string): string {
  return `${operation}#${sha256(JSON.stringify([scope ?? null, key]))}`;
}

/** DynamoDB's longest key values, in UTF-8 bytes: a partition key's, and a sort key's. */
const MAX_PARTITION_KEY_BYTES = 2048;
const MAX_SORT_KEY_BYTES = 1024;
/** What a record key adds after its operation: `#` and a SHA-256 in hex. */
const HASH_SUFFIX_BYTES = 65;

/**
 * The longest operation (UTF-8 bytes, its prefix included: `fn `, `once `) whose record keys fit the table's key
 * attribute with the key prefix before them: the record key is the sort key in a sort-key layout, else the partition key.
 */
export function maxOperationBytes(layout: { sortKey?: string; keyPrefix: string }): number {
  const limit = layout.sortKey ? MAX_SORT_KEY_BYTES : MAX_PARTITION_KEY_BYTES;
  return limit - Buffer.byteLength(layout.keyPrefix) - HASH_SUFFIX_BYTES;
}

/**
 * Checks that an operation fits the table's key: a `TypeError` naming the option it came from and the limit, where the
 * value is given (startup for routes and methods, the call for `execute()` and one-time tokens). DynamoDB would refuse
 * every request for it as invalid, which the module can only report as a misconfigured store.
 */
export function checkOperationFits(
  operation: string,
  option: string,
  where: string,
  layout: { sortKey?: string; keyPrefix: string },
): void {
  const max = maxOperationBytes(layout);
  const bytes = Buffer.byteLength(operation);
  if (bytes <= max) return;
  const key = layout.sortKey ? 'sort key (1024 bytes)' : 'partition key (2048 bytes)';
  throw new TypeError(
    `${where}: ${option} makes an operation of ${bytes} bytes (${JSON.stringify(operation.slice(0, 40))}…), and a ` +
      `record key holds at most ${max} bytes of it: the table's ${key}, less the key prefix and the 65-byte hash. ` +
      `Shorten ${option}.`,
  );
}

/**
 * The operations `IdempotencyService.execute()` (`fn <operation>`, and so `processBatch`) and one-time tokens
 * (`once <purpose>`) write: a route's or a method's `name` may not start like them, so no declared operation ever
 * shares records with a programmatic one.
 */
export const PROGRAMMATIC_PREFIXES = ['fn ', 'once '] as const;

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
