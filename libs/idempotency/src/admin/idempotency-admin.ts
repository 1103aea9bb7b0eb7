import { Logger } from '@nestjs/common';
import { IdempotencyClock, SystemClock } from '../idempotency.clock';
import { DEFAULT_FAILED_TTL_SECONDS } from '../idempotency.constants';
import { validateKey } from '../keys/idempotency-key';
import { recordKey, scopePartition } from '../keys/record-key';
import { IdempotencyRecord, IdempotencyStatus, isFinalFailure } from '../repository/idempotency.record';
import { IdempotencyRepository, RecordLocation } from '../repository/idempotency.repository';
import { ResponseSealer } from '../response/response-sealing';
import { publishOperatorEvent } from '../observability/outcome-events';
import { finalFailureKind, RecordReport, reportRecord } from './record-report';
import { releaseNote, TAKES_EFFECT } from './release-notes';
import { resolveStep, restartFromStep, StepResolution } from './step-surgery';

const logger = new Logger('Idempotency');

/**
 * Which record an operator means: the operation and the client's key as the module derives its record key (a route as
 * `POST /orders`, with its API `version`; or a route's stable `name`; or `fn charge-card` for `execute`), with the
 * caller's `scope`; or the record key as stored. `partition` overrides the partition of a sort-key layout.
 */
export interface KeySelector {
  route?: string;
  version?: string;
  name?: string;
  key?: string;
  scope?: string;
  recordKey?: string;
  partition?: string;
}

/** What an operator's release or purge did, and what the record was. */
export type AdminResult =
  | { done: true; record: RecordReport; note: string }
  | {
      done: false;
      reason: 'not_found' | 'completed' | 'not_completed' | 'changed' | 'refused';
      record?: RecordReport;
      note: string;
    };

export interface IdempotencyAdminOptions {
  repository: IdempotencyRepository;
  /** The key prefix and whether the table has a sort key: how partitions are derived. */
  keyPrefix?: string;
  sortKey?: boolean;
  /** With a sort key: the module's `partitionKeyValue` when it is a fixed string (every record's partition). */
  partitionKeyValue?: string;
  clock?: IdempotencyClock;
  /** Opens sealed answers for `showBody`. */
  sealer?: ResponseSealer;
  /**
   * Told of every record removed (or found gone) by a release or purge: the module's own admin forgets its cached
   * answer there, so the purge takes effect in this process at once.
   */
  onRemoved?: (location: RecordLocation) => void;
}

/**
 * An operator's commands for one key, behind the CLI's `keys:*` and available to inject for an app's own ops
 * endpoints (none is mounted): find a key's record, read it, release a stuck one, purge a completed one, list them.
 * Every change is conditioned on the record as it was read: an owner that changed meanwhile is never overridden.
 */
export class IdempotencyAdmin {
  private readonly repository: IdempotencyRepository;
  private readonly keyPrefix: string;
  private readonly sortKey: boolean;
  private readonly partitionKeyValue?: string;
  private readonly clock: IdempotencyClock;
  private readonly sealer?: ResponseSealer;
  private readonly onRemoved?: (location: RecordLocation) => void;

  constructor({
    repository,
    keyPrefix = '',
    sortKey = false,
    clock = new SystemClock(),
    sealer,
    onRemoved,
    partitionKeyValue,
  }: IdempotencyAdminOptions) {
    this.onRemoved = onRemoved;
    this.partitionKeyValue = partitionKeyValue;
    this.repository = repository;
    this.keyPrefix = keyPrefix;
    this.sortKey = sortKey;
    this.clock = clock;
    this.sealer = sealer;
  }

  /** The record key and partition of a selector, exactly as the module derives them. */
  locate(selector: KeySelector): RecordLocation {
    const partition = this.partitionOf(selector.scope, selector.partition);
    if (selector.recordKey) return { key: selector.recordKey, partition };
    const operation =
      selector.name ?? (selector.version ? `${selector.route} version=${selector.version}` : selector.route);
    if (!operation || selector.key === undefined) {
      throw new TypeError('a key is located by --route (or --name) and --key, or by --record-key');
    }
    // A key the module would refuse (empty, over 255 characters, control characters) has no record.
    let key: string;
    try {
      key = validateKey(selector.key)!;
    } catch (error) {
      throw new TypeError(`--key: ${(error as Error).message} The module refuses such a key, so none has a record.`, {
        cause: error,
      });
    }
    return { key: recordKey(operation, selector.scope, key), partition };
  }

  /** A sort-key layout's partition: the one given, else the fixed `partitionKeyValue`, else the scope's. */
  private partitionOf(scope: string | undefined, given: string | undefined): string | undefined {
    if (!this.sortKey) return undefined;
    return given ?? this.partitionKeyValue ?? scopePartition(this.keyPrefix, scope);
  }

  /** The record's state, or undefined when there is none. */
  async inspect(
    selector: KeySelector,
    { showBody = false }: { showBody?: boolean } = {},
  ): Promise<RecordReport | undefined> {
    const record = await this.repository.get(this.locate(selector));
    return record && this.report(record, showBody);
  }

  /**
   * Removes a PENDING or FAILED record so the key can be claimed at once (a COMPLETED one only with `force`), on the
   * condition that its claim token is still the one just read. A running owner's completion is then refused. A record
   * with recorded steps is marked FAILED instead, so that the next request resumes from them (and another request with
   * the key is refused until it expires); with `force` it is removed, its steps forgotten: they run again.
   */
  async release(selector: KeySelector, { force = false }: { force?: boolean } = {}): Promise<AdminResult> {
    const location = this.locate(selector);
    const record = await this.repository.get(location);
    if (!record) return this.notFound(location);
    if (record.status === 'COMPLETED' && !force) {
      const note = 'the key is COMPLETED: its answer is replayed. Use keys:purge to forget it, or --force';
      return { done: false, reason: 'completed', record: this.report(record), note };
    }
    const note = releaseNote(record);
    const steps = (record.steps?.length ?? 0) + (record.startedSteps?.length ?? 0);
    if (record.status !== 'COMPLETED' && steps > 0 && !force) return this.failKeepingSteps(record, steps, note);
    const forgotten = steps > 0 ? `; its ${steps} step(s) recorded or started are forgotten and run again` : '';
    return this.remove(record, note + forgotten);
  }

  /**
   * A record with recorded or started steps is released as FAILED, not removed: the next request resumes from them
   * instead of running them again (their effects happened, or may have). Guarded by the claim token read.
   */
  private async failKeepingSteps(record: IdempotencyRecord, steps: number, note: string): Promise<AdminResult> {
    const kept = `${note}, resuming from the ${steps} step(s) recorded or started (they are kept)`;
    if (isFinalFailure(record)) return this.reopen(record, kept);
    if (record.status === 'FAILED') return { done: true, record: this.report(record), note: kept };
    const { key, partition, claimToken } = record;
    const failed = await this.repository.fail({ key, partition, claimToken, ttlSeconds: DEFAULT_FAILED_TTL_SECONDS });
    if (failed.ok) return { done: true, record: this.report(record), note: kept };
    const changed = 'the record changed since it was read (another owner, or another state): nothing was done';
    return { done: false, reason: 'changed', record: failed.current && this.report(failed.current), note: changed };
  }

  /**
   * A poisoned key that holds steps: made claimable again, its steps and its crashed owners kept, so one more owner
   * tries (another crash poisons it again at once). Guarded by the claim token read.
   */
  private async reopen(record: IdempotencyRecord, note: string): Promise<AdminResult> {
    const { key, partition, claimToken } = record;
    const reopened = await this.repository.reopen({ key, partition, claimToken });
    const poisoned = finalFailureKind(record) === 'key-poisoned';
    const once = poisoned ? `${note}; one more owner may try, and another crash poisons it again` : note;
    if (reopened.removed) return { done: true, record: this.report(record), note: once };
    const changed = 'the record changed since it was read (another owner, or another state): nothing was done';
    return { done: false, reason: 'changed', record: reopened.current && this.report(reopened.current), note: changed };
  }

  /**
   * Step surgery: forgets step `name` and every step recorded after it, and releases the key (`keys:restart
   * --from-step`), or settles a started at-most-once step (`keys:resolve-step`). One write, conditioned on the record
   * as read; refused for a completed record or a live lease. Logged, and published as an outcome event
   * (`step-surgery`, on the diagnostics channel), with `operator` (who ran it).
   */
  async reviseSteps(
    selector: KeySelector,
    surgery: { restartFrom: string } | { resolve: string; resolution: StepResolution },
    { operator }: { operator?: string } = {},
  ): Promise<AdminResult> {
    const startedMs = performance.now();
    const location = this.locate(selector);
    const record = await this.repository.get(location);
    if (!record) return this.notFound(location);
    const now = this.clock.nowSeconds();
    const planned =
      'restartFrom' in surgery
        ? restartFromStep(record, surgery.restartFrom, now)
        : resolveStep(record, surgery.resolve, surgery.resolution, now, this.sealer);
    if ('refused' in planned)
      return { done: false, reason: 'refused', record: this.report(record), note: planned.refused };
    const revised = await this.repository.reviseSteps({ ...planned.revision, ttlSeconds: DEFAULT_FAILED_TTL_SECONDS });
    if (!revised.revised) {
      const changed = 'the record changed since it was read (another owner, or another state): nothing was done';
      return { done: false, reason: 'changed', record: revised.current && this.report(revised.current), note: changed };
    }
    logger.log({ msg: 'step surgery', key: record.key, ...surgery, note: planned.note, operator: operator ?? null });
    publishOperatorEvent(() => ({
      outcome: 'step-surgery',
      transport: 'admin',
      operation:
        'restartFrom' in surgery ? `restart from step ${surgery.restartFrom}` : `resolve step ${surgery.resolve}`,
      recordKey: record.key,
      ...(record.partition === undefined ? {} : { partition: record.partition }),
      durationMs: performance.now() - startedMs,
      mode: 'lease',
      ...(operator === undefined ? {} : { operator }),
    }));
    return { done: true, record: this.report(record), note: planned.note };
  }

  /** Removes a COMPLETED record: the next request with the key runs the handler again. */
  async purge(selector: KeySelector): Promise<AdminResult> {
    const location = this.locate(selector);
    const record = await this.repository.get(location);
    if (!record) return this.notFound(location);
    if (record.status !== 'COMPLETED') {
      const note = `the key is ${record.status}, not COMPLETED: use keys:release`;
      return { done: false, reason: 'not_completed', record: this.report(record), note };
    }
    return this.remove(record, `purged: the next request with this key runs the handler again; ${TAKES_EFFECT}`);
  }

  /** The records (one scope's, with a sort-key layout), filtered by status and by age since their claim. */
  async *list({
    status,
    olderThanSeconds = 0,
    scope,
    partition: given,
    pageSize = 100,
  }: {
    status?: IdempotencyStatus;
    olderThanSeconds?: number;
    scope?: string;
    /** One partition of a sort-key layout (instead of the scope's). */
    partition?: string;
    pageSize?: number;
  } = {}): AsyncIterable<RecordReport> {
    if ((scope !== undefined || given !== undefined) && !this.sortKey) {
      throw new TypeError(
        'records are listed by scope or partition only in a table with a sort key: the record key hashes scope and key together',
      );
    }
    const partition = scope === undefined && given === undefined ? undefined : this.partitionOf(scope, given);
    const now = this.clock.nowSeconds();
    // PENDING records of the whole table: the keys in flight (their index when the table has one), not every record.
    const pages =
      status === 'PENDING' && partition === undefined
        ? this.repository.inFlight({ pageSize })
        : this.repository.scan({ pageSize, partition });
    for await (const page of pages) {
      for (const record of page) {
        if (status && record.status !== status) continue;
        if (now - record.pendingSince < olderThanSeconds) continue;
        yield this.report(record);
      }
    }
  }

  /** No record: whatever this process cached of it is stale. */
  private notFound(location: RecordLocation): AdminResult {
    this.onRemoved?.(location);
    return { done: false, reason: 'not_found', note: 'no record for this key' };
  }

  private async remove(record: IdempotencyRecord, note: string): Promise<AdminResult> {
    const location: RecordLocation = { key: record.key, partition: record.partition };
    const removed = await this.repository.remove({ ...location, claimToken: record.claimToken, status: record.status });
    if (removed.removed) {
      this.onRemoved?.(location);
      return { done: true, record: this.report(record), note };
    }
    const current = removed.current && this.report(removed.current);
    const changed = 'the record changed since it was read (another owner, or another state): nothing was done';
    return { done: false, reason: 'changed', record: current, note: changed };
  }

  private report(record: IdempotencyRecord, showBody = false): RecordReport {
    return reportRecord(record, { now: this.clock.nowSeconds(), sealer: this.sealer, showBody });
  }
}
