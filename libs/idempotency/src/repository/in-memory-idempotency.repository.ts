import { randomUUID } from 'node:crypto';
import type { CommitWrite } from '../idempotency-context';
import { IdempotencyClock, SystemClock } from '../idempotency.clock';
import { IdempotencyRecord, isClaimable } from '../idempotency.record';
import {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  CompleteResult,
  FailInput,
  GetInput,
  IdempotencyRepository,
  refusal,
  RenewInput,
  ScanInput,
  TransitionResult,
} from './idempotency.repository';

/**
 * A process-local repository with the same semantics as the DynamoDB one, for unit tests and
 * single-process tools. Not shared between instances: do not use it to protect a real deployment.
 */
export class InMemoryIdempotencyRepository extends IdempotencyRepository {
  /** Responses are kept as JSON text, as DynamoDB keeps them: every read hands out its own copy. */
  private readonly records = new Map<string, StoredRecord>();
  /**
   * Every completion that carried writes (`IdempotencyContext.commitWith`), in order. The writes are recorded, not
   * applied: there is no table to apply them to. Assert on them in unit tests.
   */
  readonly commits: { key: string; writes: CommitWrite[] }[] = [];

  constructor(private readonly clock: IdempotencyClock = new SystemClock()) {
    super();
  }

  async claim({ key, fingerprint, leaseSeconds }: ClaimInput): Promise<ClaimResult> {
    const now = this.clock.nowSeconds();
    const existing = this.records.get(key);
    if (existing && !isClaimable(existing, now)) {
      return { claimed: false, existing: readRecord(existing) };
    }
    const claimToken = randomUUID();
    this.records.set(key, {
      key,
      status: 'PENDING',
      expiresAt: now + leaseSeconds,
      claimToken,
      fingerprint,
      pendingSince: now,
    });
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

  async *scan({ pageSize }: ScanInput): AsyncIterable<IdempotencyRecord[]> {
    const records = [...this.records.values()].map(({ response: _response, ...record }): IdempotencyRecord => record);
    for (let start = 0; start < records.length; start += pageSize) yield records.slice(start, start + pageSize);
  }

  private transition(
    key: string,
    claimToken: string,
    next: (record: StoredRecord) => StoredRecord,
  ): TransitionResult {
    const record = this.records.get(key);
    if (record?.status === 'PENDING' && record.claimToken === claimToken) {
      const updated = next(record);
      this.records.set(key, updated);
      return { ok: true, expiresAt: updated.expiresAt };
    }
    return refusal(claimToken, record && readRecord(record));
  }
}

/** A record as kept: its response as JSON text. */
type StoredRecord = Omit<IdempotencyRecord, 'response'> & { response?: string };

/** A copy of a kept record, its response parsed (the other fields are primitives). */
function readRecord({ response, ...record }: StoredRecord): IdempotencyRecord {
  return response === undefined ? { ...record } : { ...record, response: JSON.parse(response) };
}
