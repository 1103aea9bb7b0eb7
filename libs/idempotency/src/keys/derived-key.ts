import { createHash } from 'node:crypto';

/** The request a derived key belongs to: its record key and its fingerprint. */
export interface DerivingRequest {
  recordKey: string;
  fingerprint: string;
}

/**
 * `deriveKey` (and a step's key): the same for every run of one request (record key and fingerprint) and name, and
 * different for a different request under the same client key (one that restarted a FAILED record), so a provider
 * that deduplicates by key never answers it with the first request's effect. Never the raw client key or the claim
 * token. 64 hex digits.
 */
export function derivedKeyOf({ recordKey, fingerprint }: DerivingRequest, name: string): string {
  return createHash('sha256').update(`derived\0${recordKey}\0${fingerprint}\0${name}`).digest('hex');
}
