import { IdempotencyMismatchError } from '../errors/idempotency.errors';
import { IdempotencyClock } from '../idempotency.clock';
import type { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import type { ProtectedCall } from './protected-call';
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

export interface ReplayCacheOptions {
  /** 0: off. */
  maxEntries: number;
  /** How long an entry is trusted without reading the store again. */
  maxAgeSeconds: number;
  clock: IdempotencyClock;
}

/** An entry and the moment it stops being trusted: `maxAgeSeconds` after it was set, on the monotonic clock. */
interface Held {
  completion: CachedCompletion;
  trustedUntilMonotonicMs: number;
}

/**
 * A bounded, least-recently-used map of COMPLETED records in this process, so a hot replay costs no DynamoDB call.
 * Only COMPLETED records go in: the protocol never changes one (every write is conditioned on PENDING), but an operator
 * may delete it (`keys:purge`, `keys:release --force`) and another process may then store a new answer. So an entry is
 * trusted for `maxAgeSeconds` at most (and never past the record's `expiresAt`), then read from the store again: a purge
 * done in another process takes effect here within that bound, one done through this process's `IdempotencyAdmin` at
 * once (`evict`). The age is measured on the clock's monotonic time, so a wall-clock step back does not stretch it.
 */
export class ReplayCache {
  private readonly entries = new Map<string, Held>();
  private readonly maxEntries: number;
  private readonly maxAgeMs: number;
  private readonly clock: IdempotencyClock;

  constructor({ maxEntries, maxAgeSeconds, clock }: ReplayCacheOptions) {
    this.maxEntries = maxEntries;
    this.maxAgeMs = maxAgeSeconds * 1000;
    this.clock = clock;
  }

  get(key: string): CachedCompletion | undefined {
    const held = this.entries.get(key);
    if (!held) return undefined;
    this.entries.delete(key);
    if (this.clock.monotonicMs() >= held.trustedUntilMonotonicMs) return undefined;
    // Trusted while `expiresAt` (whole seconds) is not past, as a record read from the store would be.
    if (this.clock.nowSeconds() > held.completion.expiresAt) return undefined;
    this.entries.set(key, held); // most recently used last
    return held.completion;
  }

  set(key: string, completion: CachedCompletion): void {
    if (this.maxEntries <= 0 || completion.response.bodyOmitted) return;
    if (storedResponseBytes(completion.response) > MAX_CACHED_RESPONSE_BYTES) return;
    this.entries.delete(key);
    this.entries.set(key, { completion, trustedUntilMonotonicMs: this.clock.monotonicMs() + this.maxAgeMs });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  /** Forgets a record this process has removed (an operator's purge or forced release). */
  evict(key: string): void {
    this.entries.delete(key);
  }

  /**
   * A replay from the cache, when this process has seen the call's key COMPLETED (a different request is a mismatch,
   * thrown). With `telemetry`, the lookup is counted (hit or miss).
   */
  replayFor(
    call: Pick<ProtectedCall, 'recordKey' | 'fingerprint'>,
    telemetry?: IdempotencyTelemetry,
  ): { replay: StoredResponse } | undefined {
    if (!this.enabled) return undefined;
    const cached = this.get(call.recordKey);
    telemetry?.replayCacheLookup(cached !== undefined);
    if (!cached) return undefined;
    if (cached.fingerprint !== call.fingerprint) throw new IdempotencyMismatchError();
    return { replay: cached.response };
  }

  get enabled(): boolean {
    return this.maxEntries > 0;
  }

  get size(): number {
    return this.entries.size;
  }
}
