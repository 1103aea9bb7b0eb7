import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbIdempotencyRepository } from '../dynamodb/dynamodb-idempotency.repository';
import { IdempotencyClock, SystemClock } from '../idempotency.clock';
import type { IdempotencyModuleOptions } from '../options/idempotency.options';
import { resolveOptions } from '../options/resolved-options';
import { IdempotencyReconciler, SweepOptions, SweepResult } from './idempotency.reconciler';
import { IdempotencyTelemetry, METRICS } from './idempotency.telemetry';

/**
 * One reconciler sweep over a table, outside a Nest app: what the CLI's `reconcile` runs, and what a scheduled job
 * (a Lambda behind an EventBridge Scheduler rule, say) calls. Takes the module's options (the table, its layout, the
 * lease settings, `client` or `clientConfig`).
 */
export async function reconcileTable(
  options: IdempotencyModuleOptions,
  sweep: SweepOptions = {},
  clock: IdempotencyClock = new SystemClock(),
): Promise<SweepResult> {
  const resolved = resolveOptions(options);
  const client = options.client ?? new DynamoDBClient(options.clientConfig ?? {});
  const telemetry = new IdempotencyTelemetry(resolved.tableName);
  const repository = new DynamoDbIdempotencyRepository({
    client,
    tableName: resolved.tableName,
    clock,
    telemetry,
    keySchema: options.keySchema,
    attributeNames: options.attributeNames,
    keyPrefix: options.keyPrefix,
    inFlightIndex: options.inFlightIndex,
  });
  try {
    return await new IdempotencyReconciler(repository, clock, telemetry, resolved).sweep(sweep);
  } finally {
    if (!options.client) client.destroy();
  }
}

/**
 * Pushes a sweep's gauges to a Prometheus Pushgateway (a job is gone before any scrape): the series the in-process
 * reconciler exports (`dedup_stuck_pending_total`, `dynamo_ttl_stale_items_total`, the last success and the interval),
 * grouped by job `idempotency_reconciler` and `table`, replacing that group's previous push.
 */
export async function pushSweepGauges(
  pushgatewayUrl: string,
  {
    table,
    result,
    endedAt,
    intervalSeconds,
  }: { table: string; result: SweepResult; endedAt: number; intervalSeconds: number },
): Promise<void> {
  const gauges: [{ name: string; help: string }, number][] = [
    [METRICS.stuckPending, result.stuckPending],
    [METRICS.ttlStale, result.ttlStale],
    [METRICS.lastSweep, endedAt],
    [METRICS.sweepInterval, intervalSeconds],
  ];
  const body = gauges
    .map(([{ name, help }, value]) => `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name} ${value}\n`)
    .join('');
  const group = `job/idempotency_reconciler/table/${encodeURIComponent(table)}`;
  const target = `${pushgatewayUrl.replace(/\/$/, '')}/metrics/${group}`;
  const response = await fetch(target, {
    method: 'PUT',
    body,
    headers: { 'content-type': 'text/plain; version=0.0.4' },
  });
  if (!response.ok) throw new Error(`the Pushgateway at ${target} answered ${response.status}`);
}
