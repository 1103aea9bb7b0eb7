import { COMPACT_AFTER, EXPIRED_CHECKED_PER_WRITE, StoredRecord } from './in-memory-records';

/**
 * How `InMemoryIdempotencyRepository` evicts: every COMPLETED or FAILED record as written, oldest first, from `oldest`
 * on. A key claimed again is a new object (only a PENDING record is updated in place), and the record it replaces (or
 * a removed one) is marked `dropped`: its entry is skipped, and cut once it reaches the front. Not the map's own order:
 * a `Map` iterated from its start walks every entry deleted from its front since it last grew, and at `maxRecords`
 * every write deletes one there.
 */
export class WriteOrder {
  private finished: StoredRecord[] = [];
  private oldest = 0;

  constructor(
    private readonly records: Map<string, StoredRecord>,
    private readonly maxRecords: number,
  ) {}

  /**
   * After a write: a finished record goes last in the write order; then what has expired among the oldest is evicted,
   * and the oldest finished past the limit. A PENDING record is never evicted: its lease ends by its owner's write or a
   * takeover.
   */
  written(record: StoredRecord, now: number): void {
    if (record.status !== 'PENDING') this.finished.push(record);
    let oldest = this.oldestKept();
    for (let checked = 0; oldest && oldest.expiresAt < now && checked < EXPIRED_CHECKED_PER_WRITE; checked++) {
      this.evict(oldest);
      oldest = this.oldestKept();
    }
    if (oldest && this.records.size > this.maxRecords) this.evict(oldest);
    this.compact();
  }

  /** Evicts the record `oldestKept()` found, and passes its entry. */
  private evict(oldest: StoredRecord): void {
    this.records.delete(oldest.key);
    this.oldest++;
  }

  /**
   * Drops the entries passed at the front once they are many; and when entries written again pile up behind a front
   * that stays (a long TTL, keys failing and claimed again), keeps only the kept records: memory stays bounded by the
   * records kept, and each entry is dropped once.
   */
  private compact(): void {
    if (this.finished.length - this.oldest > 2 * this.records.size + COMPACT_AFTER) {
      this.finished = this.finished.slice(this.oldest).filter((record) => !record.dropped);
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
      if (!record.dropped) return record;
    }
    return undefined;
  }
}
