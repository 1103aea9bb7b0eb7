import { randomUUID } from 'node:crypto';
import type { CommitWrite } from './commit-write';
import { IdempotencyClock, SystemClock } from '../idempotency.clock';
import { IdempotencyRecord, isClaimable } from './idempotency.record';
import {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  CompleteResult,
  FailInput,
  GetInput,
  IdempotencyRepository,
  PutCompletedInput,
  PutCompletedResult,
  refusal,
  RemoveInput,
  RemoveResult,
  RenewInput,
  ScanInput,
  TransitionResult,
} from './idempotency.repository';

/** Options of `InMemoryIdempotencyRepository`. */
export interface InMemoryRepositoryOptions {
  /** At most this many records are kept; past it, the oldest finished (COMPLETED or FAILED) record goes first. Default 100,000. */
  maxRecords?: number;
}

/** Records past their `expiresAt` looked at per write, oldest written first: eviction keeps pace with writes. */
const EXPIRED_CHECKED_PER_WRITE = 2;

/**
 * A process-local repository with the same semantics as the DynamoDB one, for unit tests and
 * single-process tools. Not shared between instances: do not use it to protect a real deployment.
 *
 * Memory stays bounded without a timer: each write evicts up to two finished records past their `expiresAt` among the
 * oldest written (what DynamoDB's TTL does), and past `maxRecords` the oldest finished record goes. PENDING records
 * stay until their owner (or a successor) writes them.
 */
export class InMemoryIdempotencyRepository extends IdempotencyRepository {
  /** Responses are kept as JSON text, as DynamoDB keeps them: every read hands out its own copy. */
  private readonly records = new Map<string, StoredRecord>();
  /**
   * Every COMPLETED or FAILED record as written, oldest first, from `oldest` on: the order of eviction. A write is a new
   * object, so an entry whose key was written again (or removed) is no longer the kept one: skipped, and dropped once
   * it reaches the front. Not the map's own order: a `Map` iterated from its start walks every entry deleted from its
   * front since it last grew, and at `maxRecords` every write deletes one there.
   */
  private finished: StoredRecord[] = [];
  private oldest = 0;
  private readonly maxRecords: number;
  /**
   * Every completion that carried writes (`IdempotencyContext.commitWith`), in order. The writes are recorded, not
   * applied: there is no table to apply them to. Assert on them in unit tests.
   */
  readonly commits: { key: string; writes: CommitWrite[] }[] = [];

  constructor(
    private readonly clock: IdempotencyClock = new SystemClock(),
    { maxRecords = 100_000 }: InMemoryRepositoryOptions = {},
  ) {
    super();
    if (!Number.isInteger(maxRecords) || maxRecords <= 0) {
      throw new Error(
        `InMemoryIdempotencyRepository: maxRecords must be a positive whole number, got ${String(maxRecords)}`,
      );
    }
    this.maxRecords = maxRecords;
  }

  /** How many records are kept now. */
  get size(): number {
    return this.records.size;
  }

  async claim({ key, partition, fingerprint, leaseSeconds, clockSkewSeconds = 0 }: ClaimInput): Promise<ClaimResult> {
    const now = this.clock.nowSeconds();
    const existing = this.records.get(key);
    if (existing && !isClaimable(existing, now, clockSkewSeconds)) {
      return { claimed: false, existing: readRecord(existing) };
    }
    const claimToken = randomUUID();
    const record: StoredRecord = {
      key,
      status: 'PENDING',
      expiresAt: now + leaseSeconds,
      claimToken,
      fingerprint,
      pendingSince: now,
    };
    this.write(partition === undefined ? record : { ...record, partition });
    return { claimed: true, claimToken };
  }

  async complete({ key, claimToken, response, ttlSeconds, writes }: CompleteInput): Promise<CompleteResult> {
    const now = this.clock.nowSeconds();
    const result = this.transition(key, claimToken, (record) => ({
      ...record,
      status: 'COMPLETED',
      response: JSON.stringify(response),
      expiresAt: now + ttlSeconds,
      completedAt: now,
    }));
    if (result.ok && writes?.length) this.commits.push({ key, writes: structuredClone([...writes]) });
    return result;
  }

  override async putCompleted(input: PutCompletedInput): Promise<PutCompletedResult> {
    const { key, partition, fingerprint, response, ttlSeconds, clockSkewSeconds = 0, writes } = input;
    const now = this.clock.nowSeconds();
    const existing = this.records.get(key);
    if (existing && !isClaimable(existing, now, clockSkewSeconds)) {
      return { ok: false, reason: 'exists', current: readRecord(existing) };
    }
    const record: StoredRecord = {
      key,
      status: 'COMPLETED',
      expiresAt: now + ttlSeconds,
      claimToken: input.claimToken ?? randomUUID(),
      fingerprint,
      pendingSince: now,
      completedAt: now,
      response: JSON.stringify(response),
    };
    this.write(partition === undefined ? record : { ...record, partition });
    if (writes?.length) this.commits.push({ key, writes: structuredClone([...writes]) });
    return { ok: true, expiresAt: record.expiresAt };
  }

  override async supportsCommitWith(): Promise<boolean> {
    return true;
  }

  async fail({ key, claimToken, ttlSeconds }: FailInput): Promise<TransitionResult> {
    const now = this.clock.nowSeconds();
    return this.transition(key, claimToken, (record) => ({ ...record, status: 'FAILED', expiresAt: now + ttlSeconds }));
  }

  async renew({ key, claimToken, leaseSeconds }: RenewInput): Promise<TransitionResult> {
    const now = this.clock.nowSeconds();
    return this.transition(key, claimToken, (record) => ({ ...record, expiresAt: now + leaseSeconds }));
  }

  async get({ key }: GetInput): Promise<IdempotencyRecord | undefined> {
    const record = this.records.get(key);
    return record && readRecord(record);
  }

  async *scan({ pageSize, partition }: ScanInput): AsyncIterable<IdempotencyRecord[]> {
    const records = [...this.records.values()]
      .filter((record) => partition === undefined || record.partition === partition)
      .map(({ response: _response, ...record }): IdempotencyRecord => record);
    for (let start = 0; start < records.length; start += pageSize) yield records.slice(start, start + pageSize);
  }

  override async remove({ key, claimToken, status }: RemoveInput): Promise<RemoveResult> {
    const record = this.records.get(key);
    if (!record || record.claimToken !== claimToken || record.status !== status) {
      return { removed: false, current: record && readRecord(record) };
    }
    this.records.delete(key);
    return { removed: true };
  }

  private transition(key: string, claimToken: string, next: (record: StoredRecord) => StoredRecord): TransitionResult {
    const record = this.records.get(key);
    if (record?.status === 'PENDING' && record.claimToken === claimToken) {
      const updated = next(record);
      this.write(updated);
      return { ok: true, expiresAt: updated.expiresAt };
    }
    return refusal(claimToken, record && readRecord(record));
  }

  /** Stores a record as the newest, then evicts what has expired among the oldest, and the oldest finished past the limit. */
  private write(record: StoredRecord): void {
    this.records.set(record.key, record);
    // A PENDING record is never evicted: its lease ends by its owner's write or a takeover.
    if (record.status !== 'PENDING') this.finished.push(record);
    const now = this.clock.nowSeconds();
    for (let checked = 0; checked < EXPIRED_CHECKED_PER_WRITE; checked++) {
      const oldest = this.oldestKept();
      if (!oldest || oldest.expiresAt >= now) break;
      this.records.delete(oldest.key);
    }
    if (this.records.size > this.maxRecords) {
      const oldest = this.oldestKept();
      if (oldest) this.records.delete(oldest.key);
    }
    this.compact();
  }

  /**
   * Drops the entries passed at the front once they are many; and when entries written again pile up behind a front
   * that stays (a long TTL, keys failing and claimed again), keeps only the kept records: memory stays bounded by the
   * records kept, and each entry is dropped once.
   */
  private compact(): void {
    if (this.finished.length - this.oldest > 2 * this.records.size + COMPACT_AFTER) {
      this.finished = this.finished.slice(this.oldest).filter((record) => this.records.get(record.key) === record);
      this.oldest = 0;
    } else if (this.oldest > COMPACT_AFTER && this.oldest * 2 > this.finished.length) {
      this.finished.splice(0, this.oldest);
      this.oldest = 0;
    }
  }

  /** The oldest finished record still kept; the entries before it, no longer kept, are dropped from the front. */
  private oldestKept(): StoredRecord | undefined {
    for (; this.oldest < this.finished.length; this.oldest++) {
      const record = this.finished[this.oldest];
      if (this.records.get(record.key) === record) return record;
    }
    return undefined;
  }
}

/** Entries no longer kept that the finished list may hold before it is cut down. */
export const COMPACT_AFTER = 1024;

/** A record as kept: its response as JSON text. */
type StoredRecord = Omit<IdempotencyRecord, 'response'> & { response?: string };

/** A copy of a kept record, its response parsed (the other fields are primitives). */
function readRecord({ response, ...record }: StoredRecord): IdempotencyRecord {
  if (response === undefined) return { ...record };
  return { ...record, response: JSON.parse(response), responseBytes: Buffer.byteLength(response) };
}
