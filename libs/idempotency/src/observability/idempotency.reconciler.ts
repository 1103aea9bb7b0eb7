import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { IdempotencyClock } from '../idempotency.clock';
import { onLambda } from '../lambda/lambda-environment';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { clockSkewFor } from '../options/option-checks';
import { IdempotencyTelemetry } from './idempotency.telemetry';
import { IdempotencyRecord } from '../repository/idempotency.record';
import { IdempotencyRepository } from '../repository/idempotency.repository';

export interface SweepOptions {
  /** Items per Scan page. Default 100. */
  pageSize?: number;
  /** At most this many Scan pages a second, so a sweep never competes with traffic. Default 5. */
  maxPagesPerSecond?: number;
}

export interface SweepResult {
  scanned: number;
  /** PENDING items whose lease had passed (`dedup_stuck_pending_total`). */
  stuckPending: number;
  /** Of those, how many this sweep marked FAILED (the rest were taken over or finished meanwhile, or failed). */
  released: number;
  /** Of those, how many it could not mark: the store call failed (logged with its `dynamo_error_code`). */
  unreleased: number;
  /** Items past `expires_at` still present, whatever their status (`dynamo_ttl_stale_items_total`). */
  ttlStale: number;
  /**
   * Finished (COMPLETED or FAILED) items past `expires_at` this sweep deleted, where the store does not delete them
   * itself (`expiresRecordsItself()` false: an MRSC global table has no TTL); 0 elsewhere.
   */
  deleted: number;
}

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

  constructor(
    private readonly repository: IdempotencyRepository,
    private readonly clock: IdempotencyClock,
    private readonly telemetry: IdempotencyTelemetry,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async sweep({ pageSize = 100, maxPagesPerSecond = 5 }: SweepOptions = {}): Promise<SweepResult> {
    const result: SweepResult = { scanned: 0, stuckPending: 0, released: 0, unreleased: 0, ttlStale: 0, deleted: 0 };
    const expiresItself = await this.repository.expiresRecordsItself().catch(() => true);
    const pageIntervalMs = 1000 / maxPagesPerSecond;
    // A lease is stuck once no process could still be renewing it, whatever their clocks say (the module's lease).
    const skew = clockSkewFor(this.options.pendingTtlSeconds, this.options.clockSkewSeconds);
    let pageStarted = performance.now();
    for await (const page of this.repository.scan({ pageSize })) {
      const now = this.clock.nowSeconds();
      for (const record of page) {
        result.scanned += 1;
        if (record.expiresAt >= now) continue;
        result.ttlStale += 1;
        if (record.status !== 'PENDING') {
          if (!expiresItself && record.expiresAt < now - skew && (await this.expire(record))) result.deleted += 1;
          continue;
        }
        if (record.expiresAt >= now - skew) continue;
        result.stuckPending += 1;
        this.logger.warn({
          msg: 'stuck PENDING item: lease passed without completion',
          key: record.key,
          pending_since: record.pendingSince,
          expires_at: record.expiresAt,
        });
        const released = await this.release(record);
        if (released === 'released') result.released += 1;
        if (released === 'error') result.unreleased += 1;
      }
      await sleep(Math.max(0, pageIntervalMs - (performance.now() - pageStarted)));
      pageStarted = performance.now();
    }
    const { stuckPending, ttlStale } = result;
    this.telemetry.sweepFound(this.options.tableName, { stuckPending, ttlStale, endedAt: this.clock.nowSeconds() });
    this.logger.log({ msg: 'sweep done', table: this.options.tableName, ...result });
    return result;
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
  private async release(record: IdempotencyRecord): Promise<'released' | 'moved-on' | 'error'> {
    try {
      const { key, partition, claimToken } = record;
      const released = await this.repository.fail({
        key,
        partition,
        claimToken,
        ttlSeconds: this.options.failedTtlSeconds,
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
