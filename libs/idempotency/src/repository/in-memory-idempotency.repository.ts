import { randomUUID } from 'node:crypto';
import type { CommitWrite } from './commit-write';
import { IdempotencyClock, SystemClock } from '../idempotency.clock';
import { IdempotencyRecord, IdempotencyStatus, isClaimable, StoredResponse } from './idempotency.record';
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
    this.write(storedRecord(key, partition, 'PENDING', now + leaseSeconds, claimToken, fingerprint, now));
    return { claimed: true, claimToken };
  }

  async complete({ key, claimToken, response, ttlSeconds, writes }: CompleteInput): Promise<CompleteResult> {
    const now = this.clock.nowSeconds();
    const result = this.transition(key, claimToken, 'COMPLETED', now + ttlSeconds, JSON.stringify(response), now);
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
    const claimToken = input.claimToken ?? randomUUID();
    const record: StoredRecord = storedRecord(
      key,
      partition,
      'COMPLETED',
      now + ttlSeconds,
      claimToken,
      fingerprint,
      now,
    );
    record.completedAt = now;
    record.response = JSON.stringify(response);
    this.write(record);
    if (writes?.length) this.commits.push({ key, writes: structuredClone([...writes]) });
    return { ok: true, expiresAt: record.expiresAt };
  }

  override async supportsCommitWith(): Promise<boolean> {
    return true;
  }

  async fail({ key, claimToken, ttlSeconds }: FailInput): Promise<TransitionResult> {
    const now = this.clock.nowSeconds();
    return this.transition(key, claimToken, 'FAILED', now + ttlSeconds);
  }

  async renew({ key, claimToken, leaseSeconds }: RenewInput): Promise<TransitionResult> {
    const now = this.clock.nowSeconds();
    return this.transition(key, claimToken, 'PENDING', now + leaseSeconds);
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

  /** The owner's write of its PENDING record: a new record with this status and expiry (a completion: its response). */
  private transition(
    key: string,
    claimToken: string,
    status: IdempotencyStatus,
    expiresAt: number,
    response?: string,
    completedAt?: number,
  ): TransitionResult {
    const record = this.records.get(key);
    if (record?.status === 'PENDING' && record.claimToken === claimToken) {
      const { partition, fingerprint, pendingSince } = record;
      const updated: StoredRecord = storedRecord(
        key,
        partition,
        status,
        expiresAt,
        claimToken,
        fingerprint,
        pendingSince,
      );
      if (completedAt !== undefined) updated.completedAt = completedAt;
      if (response !== undefined) updated.response = response;
      this.write(updated);
      return { ok: true, expiresAt };
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

/** What a kept record and a record handed out have in common. */
type RecordFields = Omit<IdempotencyRecord, 'response' | 'responseBytes'>;

/**
 * A record written out field by field, the optional ones set only when present: in V8, adding fields to an object made
 * by a spread (`{ ...record, status }`) is a slow path, about 2 µs each time, more than the rest of a write.
 */
function storedRecord(
  key: string,
  partition: string | undefined,
  status: IdempotencyStatus,
  expiresAt: number,
  claimToken: string,
  fingerprint: string,
  pendingSince: number,
): RecordFields {
  const record: RecordFields = { key, status, expiresAt, claimToken, fingerprint, pendingSince };
  if (partition !== undefined) record.partition = partition;
  return record;
}

/** A copy of a kept record, its response parsed (the other fields are primitives). */
function readRecord(stored: StoredRecord): IdempotencyRecord {
  const { key, partition, status, expiresAt, claimToken, fingerprint, pendingSince, completedAt, response } = stored;
  const record: IdempotencyRecord = storedRecord(
    key,
    partition,
    status,
    expiresAt,
    claimToken,
    fingerprint,
    pendingSince,
  );
  if (completedAt !== undefined) record.completedAt = completedAt;
  if (response !== undefined) {
    record.response = JSON.parse(response) as StoredResponse;
    record.responseBytes = Buffer.byteLength(response);
  }
  return record;
}
