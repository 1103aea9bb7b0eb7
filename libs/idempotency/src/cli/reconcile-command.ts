import { Logger } from '@nestjs/common';
import { SystemClock } from '../idempotency.clock';
import { SweepResult } from '../observability/idempotency.reconciler';
import { pushSweepGauges, reconcileTable } from '../observability/reconcile-job';
import { CliCommand, CliContext, durationSeconds, UsageError, StderrLogger } from './cli-context';

/** Exit code of a sweep that found stuck items it could not release (the store failed on them). */
export const EXIT_UNRELEASED = 3;

export const RECONCILE_COMMANDS = {
  reconcile: {
    summary:
      'one reconciler sweep: release stuck PENDING items, count TTL-stale ones; exit 0, 1 if the sweep failed, 3 if stuck items could not be released',
    usage:
      'reconcile [--max-pages-per-second 5] [--page-size 100] [--ttl-count sample|full] [--pushgateway URL] [--interval 60s] [--pending-ttl-seconds 60] [flags]',
    flags: {
      'max-pages-per-second': { type: 'string' },
      'page-size': { type: 'string' },
      pushgateway: { type: 'string' },
      interval: { type: 'string' },
      'pending-ttl-seconds': { type: 'string' },
      'ttl-count': { type: 'string' },
    },
    run: reconcile,
  },
} satisfies Record<string, CliCommand>;

async function reconcile(context: CliContext): Promise<number> {
  const { values, tableName, layout, config } = context;
  const number = (flag: string) => {
    const raw = values[flag];
    if (raw === undefined) return undefined;
    const value = Number(raw);
    if (!(value > 0)) throw new UsageError(`--${flag} must be a number above 0, got ${String(raw)}`);
    return value;
  };
  const interval = typeof values.interval === 'string' ? durationSeconds(values.interval, '--interval') : 60;
  const ttlCount = values['ttl-count'] ?? 'sample';
  if (ttlCount !== 'sample' && ttlCount !== 'full') {
    throw new UsageError(`--ttl-count is sample or full, got ${String(ttlCount)}`);
  }
  Logger.overrideLogger(new StderrLogger()); // stdout is the result's (--json)
  const clock = new SystemClock();
  let result: SweepResult;
  try {
    result = await reconcileTable(
      {
        client: context.client,
        tableName,
        ...layout,
        pendingTtlSeconds: number('pending-ttl-seconds') ?? config.pendingTtlSeconds,
        clockSkewSeconds: config.clockSkewSeconds,
        failedTtlSeconds: config.failedTtlSeconds,
        reconcileIntervalSeconds: interval,
      },
      { maxPagesPerSecond: number('max-pages-per-second'), pageSize: number('page-size'), ttlCount },
      clock,
    );
  } catch (error) {
    context.out.error(`the sweep of ${context.where} failed: ${(error as Error).message}`);
    return 1;
  }
  const pushgateway = values.pushgateway;
  if (typeof pushgateway === 'string') {
    try {
      await pushSweepGauges(pushgateway, {
        table: tableName,
        result,
        endedAt: clock.nowSeconds(),
        intervalSeconds: interval,
      });
    } catch (error) {
      context.out.error(`the sweep's gauges were not pushed: ${(error as Error).message}`);
      return 1;
    }
  }
  context.print({ table: tableName, ...result }, [
    `swept ${context.where}: ${result.scanned} records read (${result.indexed ? 'the keys in flight from their index' : 'every item: the table has no index of keys in flight'})`,
    `stuck PENDING: ${result.stuckPending} (released ${result.released}, could not release ${result.unreleased})`,
    `TTL-stale: ${result.ttlEstimated ? `about ${result.ttlStale}, estimated from a sample of ${result.ttlSampled} items` : `${result.ttlStale} of ${result.ttlSampled} items`}`,
  ]);
  return result.unreleased > 0 ? EXIT_UNRELEASED : 0;
}
