import { StoredResponse } from '../repository/idempotency.record';
import { storedResponseBytes } from '../response/stored-response.codec';

/** A COMPLETED record as far as a replay needs it. */
export interface CachedCompletion {
  fingerprint: string;
  /** Epoch seconds: the record's retention end. */
  expiresAt: number;
  response: StoredResponse;
}

/** Responses larger than this (as JSON) are not kept: the cache's memory stays bounded by entries × this. */
export const MAX_CACHED_RESPONSE_BYTES = 64 * 1024;

/**
 * A bounded, least-recently-used map of COMPLETED records in this process, so a hot replay costs no DynamoDB call.
 * Only COMPLETED records go in: they cannot change until they expire (every write is conditioned on PENDING), so a
 * cached one is as good as a read until its `expiresAt`, which every lookup checks.
 */
export class ReplayCache {
  private readonly entries = new Map<string, CachedCompletion>();

  constructor(private readonly maxEntries: number) {}

  get(key: string, nowSeconds: number): CachedCompletion | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAt < nowSeconds) return undefined;
    this.entries.set(key, entry); // most recently used last
    return entry;
  }

  set(key: string, entry: CachedCompletion): void {
    if (this.maxEntries <= 0 || entry.response.bodyOmitted) return;
    if (storedResponseBytes(entry.response) > MAX_CACHED_RESPONSE_BYTES) return;
    this.entries.delete(key);
    this.entries.set(key, entry);
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  get enabled(): boolean {
    return this.maxEntries > 0;
  }

  get size(): number {
    return this.entries.size;
  }
}
