import type { CommitWrite } from './commit-write';
import { IdempotencyClock, SystemClock } from '../idempotency.clock';
import { claimableBy, IdempotencyRecord, IdempotencyStatus, isClaimable, versionChange } from './idempotency.record';
import { nextClaimToken, readRecord, readSteps, revisable, revise, segmentOf } from './in-memory-records';
import { StoredRecord, storedRecord } from './in-memory-records';
import { WriteOrder } from './in-memory-write-order';
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
  RecordStepInput,
  RecordStepResult,
  refusal,
  RemoveInput,
  RemoveResult,
  RenewInput,
  ReviseStepsInput,
  ReviseStepsResult,
  ScanInput,
  StartStepInput,
  TransitionResult,
} from './idempotency.repository';

/** Options of `InMemoryIdempotencyRepository`. */
export interface InMemoryRepositoryOptions {
  /** At most this many records are kept; past it, the oldest finished (COMPLETED or FAILED) record goes first. Default 100,000. */
  maxRecords?: number;
}

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
  /** The finished records in the order they were written: the order of eviction (`WriteOrder`). */
  private readonly order: WriteOrder;
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
    this.order = new WriteOrder(this.records, maxRecords);
  }

  /** How many records are kept now. */
  get size(): number {
    return this.records.size;
  }

  async claim(input: ClaimInput): Promise<ClaimResult> {
    const { key, partition, fingerprint, leaseSeconds, clockSkewSeconds = 0, holder, version } = input;
    const now = this.clock.nowSeconds();
    const existing = this.records.get(key);
    const read = existing && readRecord(existing);
    if (read && !claimableBy(read, fingerprint, now, clockSkewSeconds)) return { claimed: false, existing: read };
    // The same request left unfinished is resumed with its steps (unless another version's, `onVersionChange`).
    const same = existing?.status !== 'COMPLETED' && existing?.fingerprint === fingerprint;
    const change = same ? versionChange(input, read) : undefined;
    if (change === 'refuse') return { claimed: false, existing: read! };
    const claimToken = nextClaimToken();
    const resumed = same && change === undefined ? existing : undefined;
    const runs = Math.max(1, (resumed?.runs ?? 0) + 1);
    const steps = resumed?.steps && new Map(resumed.steps);
    // Every field at once (V8 keeps one shape for every claim); the partition only in a sort-key layout, as before.
    const record: StoredRecord = {
      key,
      status: 'PENDING',
      expiresAt: now + leaseSeconds,
      claimToken,
      fingerprint,
      pendingSince: now,
      runs,
      steps,
    };
    if (partition !== undefined) record.partition = partition;
    if (holder !== undefined) record.holder = holder;
    const written = version ?? existing?.version; // as DynamoDB's update: a claim without one leaves it
    if (written !== undefined) record.version = written;
    // The owners since the last clean end: the resumed request's, then this claim's (a restart starts them again).
    record.owners = [...(resumed?.owners ?? []), holder ?? ''];
    this.write(record, existing, now);
    const { steps: recorded, startedSteps } = steps ? readSteps(steps) : { steps: [], startedSteps: [] };
    const claimed = { claimed: true as const, claimToken, run: runs, steps: recorded, startedSteps };
    return resumed?.status === 'PENDING' ? { ...claimed, takenOver: [...(resumed.owners ?? [])] } : claimed;
  }

  override async recordStep({ key, claimToken, step }: RecordStepInput): Promise<RecordStepResult> {
    return this.setStep(key, claimToken, step.name, { ...step, recordedAt: this.clock.nowSeconds() });
  }

  override async startStep({ key, claimToken, step }: StartStepInput): Promise<RecordStepResult> {
    return this.setStep(key, claimToken, step.name, { ...step, startedAt: this.clock.nowSeconds() });
  }

  /** A step's entry (its result, or its start), set while `claimToken` owns the PENDING record. */
  private setStep(key: string, claimToken: string, name: string, entry: object): RecordStepResult {
    const record = this.records.get(key);
    if (record?.status !== 'PENDING' || record.claimToken !== claimToken) {
      return refusal(claimToken, record && readRecord(record));
    }
    (record.steps ??= new Map()).set(name, JSON.stringify(entry));
    return { ok: true };
  }

  async complete({ key, claimToken, response, ttlSeconds, writes }: CompleteInput): Promise<CompleteResult> {
    const now = this.clock.nowSeconds();
    const result = this.transition(key, claimToken, 'COMPLETED', now + ttlSeconds, now, JSON.stringify(response));
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
    const claimToken = input.claimToken ?? nextClaimToken();
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
    this.write(record, existing, now);
    if (writes?.length) this.commits.push({ key, writes: structuredClone([...writes]) });
    return { ok: true, expiresAt: record.expiresAt };
  }

  override async supportsCommitWith(): Promise<boolean> {
    return true;
  }

  async fail(input: FailInput): Promise<TransitionResult> {
    const { key, claimToken, ttlSeconds, forgetRun, leaseEndedBefore, endedCleanly, response } = input;
    const now = this.clock.nowSeconds();
    const running = this.records.get(key);
    if (leaseEndedBefore !== undefined && running && !(running.expiresAt < leaseEndedBefore)) {
      return refusal(claimToken, readRecord(running));
    }
    const stored = response === undefined ? undefined : JSON.stringify(response);
    const result = this.transition(key, claimToken, 'FAILED', now + ttlSeconds, now, stored);
    const record = this.records.get(key);
    if (result.ok && forgetRun && record?.runs !== undefined) record.runs--;
    if (result.ok && endedCleanly) delete record!.owners;
    return result;
  }

  override async reopen({ key, claimToken }: Omit<RemoveInput, 'status'>): Promise<RemoveResult> {
    const record = this.records.get(key);
    if (!record || record.claimToken !== claimToken || record.status !== 'FAILED' || record.response === undefined) {
      return { removed: false, current: record && readRecord(record) };
    }
    delete record.response;
    return { removed: true };
  }

  override async reviseSteps(input: ReviseStepsInput): Promise<ReviseStepsResult> {
    const record = this.records.get(input.key);
    const now = this.clock.nowSeconds();
    if (!record || !revisable(record, input)) return { revised: false, current: record && readRecord(record) };
    revise(record, input, now);
    // Released: a PENDING record is a finished one now (a FAILED one is in the write order already, once).
    if (input.status === 'PENDING') this.order.written(record, now);
    return { revised: true };
  }

  async renew({ key, claimToken, leaseSeconds }: RenewInput): Promise<TransitionResult> {
    const now = this.clock.nowSeconds();
    return this.transition(key, claimToken, 'PENDING', now + leaseSeconds, now);
  }

  async get({ key }: GetInput): Promise<IdempotencyRecord | undefined> {
    const record = this.records.get(key);
    return record && readRecord(record);
  }

  async *scan({ pageSize, partition, segment, maxPages = Infinity }: ScanInput): AsyncIterable<IdempotencyRecord[]> {
    const records = [...this.records.values()]
      .filter((record) => partition === undefined || record.partition === partition)
      .filter((record) => !segment || segmentOf(record.key, segment.total) === segment.index)
      .map((record) => readRecord(record, true));
    for (let start = 0, pages = 0; start < records.length && pages < maxPages; start += pageSize, pages++) {
      yield records.slice(start, start + pageSize);
    }
  }

  override async remove({ key, claimToken, status }: RemoveInput): Promise<RemoveResult> {
    const record = this.records.get(key);
    if (!record || record.claimToken !== claimToken || record.status !== status) {
      return { removed: false, current: record && readRecord(record) };
    }
    this.records.delete(key);
    record.dropped = true;
    return { removed: true };
  }

  /**
   * The owner's write of its PENDING record, in place: this status and expiry (a completion: its response). A PENDING
   * record is in no write-order list yet, so a finished one goes there once.
   */
  private transition(
    key: string,
    claimToken: string,
    status: IdempotencyStatus,
    expiresAt: number,
    now: number,
    response?: string,
  ): TransitionResult {
    const record = this.records.get(key);
    if (record?.status !== 'PENDING' || record.claimToken !== claimToken) {
      return refusal(claimToken, record && readRecord(record));
    }
    record.status = status;
    record.expiresAt = expiresAt;
    if (status === 'PENDING') record.renewedAt = now; // a renewal
    if (status === 'COMPLETED') record.completedAt = now;
    if (response !== undefined) record.response = response;
    this.order.written(record, now);
    return { ok: true, expiresAt };
  }

  /** Stores a new record in place of the key's `replaced` one (marked `dropped`), then evicts as every write does. */
  private write(record: StoredRecord, replaced: StoredRecord | undefined, now: number): void {
    if (replaced) replaced.dropped = true;
    this.records.set(record.key, record);
    this.order.written(record, now);
  }
}
