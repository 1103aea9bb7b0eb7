import { createHash } from 'node:crypto';

/**
 * `deriveKey` (and a step's key): the same for every run of a record and name, never the raw client key or the claim
 * token. 64 hex digits.
 */
export function derivedKeyOf(recordKey: string, name: string): string {
  return createHash('sha256').update(`derived\0${recordKey}\0${name}`).digest('hex');
}
