import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { IdempotencyClock } from '../idempotency.clock';
import { onLambda } from '../lambda/lambda-environment';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { clockSkewFor } from '../options/option-checks';
import { IdempotencyTelemetry } from './idempotency.telemetry';
import { IdempotencyRecord } from '../repository/idempotency.record';
import { IdempotencyRepository, InFlightCost } from '../repository/idempotency.repository';
import { pacer, sampleOf, scanCostInWords } from './sweep-cost';

export interface SweepOptions {
  /** Items per page (a Query of the index of keys in flight, or a Scan). Default 100. */
  pageSize?: number;
  /** At most this many pages a second, so a sweep never competes with traffic. Default 5. */
  maxPagesPerSecond?: number;
  /**
   * The TTL canary (`dynamo_ttl_stale_items_total`) on a table with the index of keys in flight: `'sample'` (default)
   * estimates it from 4 segments of a parallel scan, a page each (about 400 items, whatever the table's size); `'full'`
   * counts every item. Without the index the sweep reads every item anyway, and counts them all.
   */
  ttlCount?: 'sample' | 'full';
}

export interface SweepResult {
  /** Items read: the keys in flight (all of the table's without the index), and the TTL canary's. */
  scanned: number;
  /** PENDING items whose lease had passed (`dedup_stuck_pending_total`). */
  stuckPending: number;
  /** Of those, how many this sweep marked FAILED (the rest were taken over, renewed or finished meanwhile, or failed). */
  released: number;
  /** Of those, how many it could not mark: the store call failed (logged with its `dynamo_error_code`). */
  unreleased: number;
  /**
   * Items past `expires_at` still present, whatever their status (`dynamo_ttl_stale_items_total`): counted, or estimated
   * from `ttlSampled` items when `ttlEstimated`.
   */
  ttlStale: number;
  /** How many items the TTL canary read. */
  ttlSampled: number;
  /** Whether `ttlStale` is an estimate from a sample (a large table) rather than a count. */
  ttlEstimated: boolean;
  /** Whether the keys in flight were read from the table's index of them (else from a scan of the table). */
  indexed: boolean;
  /**
   * Finished (COMPLETED or FAILED) items past `expires_at` this sweep deleted, where the store does not delete them
   * itself (`expiresRecordsItself()` false: an MRSC global table has no TTL); 0 elsewhere.
   */
  deleted: number;
}

/**
 * The TTL canary's sample: this many segments of a parallel scan, a page of 100 each, of as many segments as make about
 * 100 items each (the table's item count, from `DescribeTable`); or, the count not known yet, this many first pages.
 */
const SAMPLE_SEGMENTS = 4;
const ITEMS_PER_SEGMENT = 100;

/**
 * The reconciliation job: finds PENDING items whose lease has passed (a crashed worker), marks them
 * FAILED so the key is visibly claimable, and counts items TTL has not deleted yet. Both counts become gauges.
 * Marking is conditioned on the item's own claim token: a worker that claimed since is never overridden.
 * Runs on demand (`sweep()`), or every `reconcileIntervalSeconds` when that module option is set.
 */
@Injectable()
export class IdempotencyReconciler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('IdempotencyReconciler');
  private timer?: NodeJS.Timeout;
  private running?: Promise<SweepResult>;
  /** Whether what a sweep reads was said (at the first sweep). */
  private costSaid = false;

  constructor(
    private readonly repository: IdempotencyRepository,
    private readonly clock: IdempotencyClock,
    private readonly telemetry: IdempotencyTelemetry,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async sweep({ pageSize = 100, maxPagesPerSecond = 5, ttlCount = 'sample' }: SweepOptions = {}): Promise<SweepResult> {
    const result: SweepResult = {
      scanned: 0,
      stuckPending: 0,
      released: 0,
      unreleased: 0,
      ttlStale: 0,
      ttlSampled: 0,
      ttlEstimated: false,
      indexed: false,
      deleted: 0,
    };
    const expiresItself = await this.repository.expiresRecordsItself().catch(() => true);
    const cost = await this.repository.inFlightCost().catch((): InFlightCost => ({ indexed: false }));
    result.indexed = cost.indexed;
    this.sayCost(cost, pageSize, maxPagesPerSecond);
    const pace = pacer(maxPagesPerSecond);
    // A lease is stuck once no process could still be renewing it, whatever their clocks say (the module's lease).
    const skew = clockSkewFor(this.options.pendingTtlSeconds, this.options.clockSkewSeconds);
    const now = this.clock.nowSeconds();
    const stuckBefore = now - skew; // a lease that ended before this is stuck
    if (cost.indexed) {
      // The keys in flight from their index (what the sweep releases), and the TTL canary from a sample.
      await this.countTtlStale(result, { pageSize, pace, skew, expiresItself, cost, ttlCount, now });
      for await (const page of this.repository.inFlight({ pageSize, leaseEndedBefore: stuckBefore })) {
        result.scanned += page.length;
        for (const record of page) await this.releaseStuck(record, result, stuckBefore);
        await pace();
      }
    } else {
      // Without the index, one scan of every item serves both (as before the index).
      for await (const page of this.repository.scan({ pageSize })) {
        result.scanned += page.length;
        result.ttlSampled += page.length;
        for (const record of page) {
          if (!(await this.expired(record, result, { now, skew, expiresItself }))) continue;
          if (record.status === 'PENDING' && record.expiresAt < stuckBefore) {
            await this.releaseStuck(record, result, stuckBefore);
          }
        }
        await pace();
      }
    }
    const { stuckPending, ttlStale } = result;
    this.telemetry.sweepFound(this.options.tableName, { stuckPending, ttlStale, endedAt: this.clock.nowSeconds() });
    this.logger.log({ msg: 'sweep done', table: this.options.tableName, ...result });
    return result;
  }

  /**
   * Whether a record read is past its `expires_at` (counted TTL-stale); a finished one past it by the margin is deleted
   * where the store does not expire records itself (an MRSC global table: no TTL).
   */
  private async expired(
    record: IdempotencyRecord,
    result: SweepResult,
    { now, skew, expiresItself }: { now: number; skew: number; expiresItself: boolean },
  ): Promise<boolean> {
    if (record.expiresAt >= now) return false;
    result.ttlStale += 1;
    const finished = record.status !== 'PENDING' && record.expiresAt < now - skew;
    if (!expiresItself && finished && (await this.expire(record))) result.deleted += 1;
    return true;
  }

  /** A stuck lease: logged, and marked FAILED on its own claim token (a claim since is never overridden). */
  private async releaseStuck(record: IdempotencyRecord, result: SweepResult, leaseEndedBefore: number): Promise<void> {
    result.stuckPending += 1;
    this.logger.warn({
      msg: 'stuck PENDING item: lease passed without completion',
      key: record.key,
      pending_since: record.pendingSince,
      expires_at: record.expiresAt,
    });
    const released = await this.release(record, leaseEndedBefore);
    if (released === 'released') result.released += 1;
    if (released === 'error') result.unreleased += 1;
  }

  /**
   * The TTL canary with the index of keys in flight (which holds no finished record): the items past `expires_at` still
   * present, estimated from a sample of a parallel scan's segments, a page each (a constant cost, whatever the table's
   * size); counted over the whole table when asked (`ttlCount: 'full'`), when the table is no bigger than the sample,
   * or where the store does not expire records itself (the expired finished ones are then deleted as they are read).
   */
  private async countTtlStale(
    result: SweepResult,
    settings: {
      pageSize: number;
      pace: () => Promise<void>;
      skew: number;
      now: number;
      expiresItself: boolean;
      cost: InFlightCost;
      ttlCount: 'sample' | 'full';
    },
  ): Promise<void> {
    const { pageSize, pace, expiresItself, cost, ttlCount } = settings;
    const { itemCount } = cost;
    const whole = !expiresItself || ttlCount === 'full';
    // A size DescribeTable does not know yet (it counts about every 6 hours): the first pages of a scan, a fixed sample
    // (a table that ends within them is counted whole); a known size: a few segments of a parallel scan, scaled up.
    const total = itemCount ? Math.ceil(itemCount / ITEMS_PER_SEGMENT) : 0;
    const sampled = !whole && total > SAMPLE_SEGMENTS;
    const segments = sampled ? sampleOf(total, SAMPLE_SEGMENTS) : [undefined];
    const firstPages = whole || sampled ? {} : { maxPages: SAMPLE_SEGMENTS };
    for (const segment of segments) {
      const scan = segment ? { pageSize: ITEMS_PER_SEGMENT, segment, maxPages: 1 } : { pageSize, ...firstPages };
      for await (const page of this.repository.scan(scan)) {
        result.scanned += page.length;
        result.ttlSampled += page.length;
        for (const record of page) await this.expired(record, result, settings);
        await pace();
      }
    }
    if (sampled) result.ttlStale = Math.round((result.ttlStale * total) / segments.length);
    // Every item read: a whole count; else a sample (scaled when the table's size is known, a fixed one otherwise).
    result.ttlEstimated = sampled || (!whole && result.ttlSampled >= SAMPLE_SEGMENTS * pageSize);
  }

  /**
   * Said once, at the first sweep: what a sweep reads. With the index of keys in flight, the records in flight; without
   * it, every item of the table (its count and size from `DescribeTable`), its read units and how long it takes at this
   * pace, and, when it cannot finish within `reconcileIntervalSeconds`, that the stuck-PENDING alert cannot hold, with
   * the command that adds the index.
   */
  private sayCost(cost: InFlightCost, pageSize: number, maxPagesPerSecond: number): void {
    if (this.costSaid) return;
    this.costSaid = true;
    const table = this.options.tableName;
    if (cost.indexed) {
      this.logger.log({ msg: `sweeps read the keys in flight from the index ${cost.index}, not the table`, table });
      return;
    }
    const statement = scanCostInWords(cost, pageSize * maxPagesPerSecond, this.options.reconcileIntervalSeconds);
    const log = statement.warn ? this.logger.warn.bind(this.logger) : this.logger.log.bind(this.logger);
    log({ msg: statement.text, table, ...(cost.addIndex ? { add_index: cost.addIndex } : {}) });
  }

  /** A sweep now, then one every `reconcileIntervalSeconds` (when set). */
  onApplicationBootstrap(): void {
    const { reconcileIntervalSeconds, tableName } = this.options;
    if (!reconcileIntervalSeconds) return;
    if (onLambda()) {
      this.logger.warn({
        msg: 'reconcileIntervalSeconds on AWS Lambda: sweeps run only while an invocation does (the function is frozen between them); run the reconciler as a scheduled job instead (docs/lambda.md)',
      });
    }
    this.telemetry.sweepScheduled(tableName, reconcileIntervalSeconds);
    void this.scheduledSweep();
    this.timer = setInterval(() => void this.scheduledSweep(), reconcileIntervalSeconds * 1000);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** Deletes an expired finished record, as it was read (what TTL would do); a store fault is logged, not thrown. */
  private async expire({ key, partition, claimToken, status }: IdempotencyRecord): Promise<boolean> {
    try {
      return (await this.repository.remove({ key, partition, claimToken, status })).removed;
    } catch (error) {
      this.logger.error({ msg: 'could not delete an expired item', key, error: String(error) });
      return false;
    }
  }

  /** Marks a stuck record FAILED, on its own claim token; a store fault is logged and counted, not thrown. */
  private async release(
    record: IdempotencyRecord,
    leaseEndedBefore: number,
  ): Promise<'released' | 'moved-on' | 'error'> {
    try {
      const { key, partition, claimToken } = record;
      const released = await this.repository.fail({
        key,
        partition,
        claimToken,
        ttlSeconds: this.options.failedTtlSeconds,
        leaseEndedBefore, // it was read from an eventually consistent index or scan: a lease renewed since is kept
      });
      return released.ok ? 'released' : 'moved-on';
    } catch (error) {
      this.logger.error({ msg: 'could not release a stuck item', key: record.key, error: String(error) });
      return 'error';
    }
  }

  /** One sweep at a time; a failed sweep is logged and the next interval tries again. */
  private async scheduledSweep(): Promise<void> {
    if (this.running) return;
    this.running = this.sweep();
    try {
      await this.running;
    } catch (error) {
      this.logger.error({ msg: 'sweep failed', error: String(error) });
    } finally {
      this.running = undefined;
    }
  }
}
