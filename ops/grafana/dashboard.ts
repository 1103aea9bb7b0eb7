// Generates ops/grafana/idempotency.dashboard.json with Grafana's typed builders: `npm run ops:dashboard`. A test
// (test/ops/dashboard.spec.ts) builds it again and compares, so the committed JSON cannot drift from this file.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Dataquery } from '@grafana/grafana-foundation-sdk/cog';
import { Builder } from '@grafana/grafana-foundation-sdk/cog';
import { LegendDisplayMode, VizLegendOptionsBuilder } from '@grafana/grafana-foundation-sdk/common';
import {
  Dashboard,
  DashboardBuilder,
  DatasourceVariableBuilder,
  QueryVariableBuilder,
  RowBuilder,
  VariableRefresh,
  VariableSort,
} from '@grafana/grafana-foundation-sdk/dashboard';
import { DataqueryBuilder } from '@grafana/grafana-foundation-sdk/prometheus';
import { PanelBuilder as StatPanel } from '@grafana/grafana-foundation-sdk/stat';
import { PanelBuilder as TimeSeriesPanel } from '@grafana/grafana-foundation-sdk/timeseries';

const DATASOURCE = { type: 'prometheus', uid: '${datasource}' };
/** Every query's selector for the chosen tables. */
const TABLE = 'table=~"$table"';

function query(expr: string, legend: string): Builder<Dataquery> {
  return new DataqueryBuilder().expr(expr).legendFormat(legend).datasource(DATASOURCE);
}

function timeSeries(title: string, description: string, unit: string, queries: Builder<Dataquery>[]) {
  return new TimeSeriesPanel()
    .title(title)
    .description(description)
    .datasource(DATASOURCE)
    .unit(unit)
    .min(0)
    .height(8)
    .span(12)
    .targets(queries)
    .legend(new VizLegendOptionsBuilder().displayMode(LegendDisplayMode.List).showLegend(true));
}

function stat(title: string, description: string, unit: string, expr: string) {
  return new StatPanel()
    .title(title)
    .description(description)
    .datasource(DATASOURCE)
    .unit(unit)
    .height(4)
    .span(6)
    .withTarget(query(expr, '{{table}}'));
}

export function idempotencyDashboard(): Dashboard {
  return new DashboardBuilder('Idempotency (nestjs-dynamodb-idempotency)')
    .uid('nestjs-dynamodb-idempotency')
    .description(
      'Outcomes, store calls, leases and the reconciler. Alerts and their runbooks: docs/operating.md#alerts',
    )
    .tags(['idempotency', 'dynamodb', 'nestjs'])
    .refresh('1m')
    .time({ from: 'now-6h', to: 'now' })
    .timezone('browser')
    .withVariable(new DatasourceVariableBuilder('datasource').label('Data source').type('prometheus'))
    .withVariable(
      new QueryVariableBuilder('table')
        .label('Table')
        .datasource(DATASOURCE)
        .query('label_values(idempotency_store_call_duration_seconds_count, table)')
        .refresh(VariableRefresh.OnTimeRangeChanged)
        .sort(VariableSort.AlphabeticalAsc)
        .multi(true)
        .includeAll(true)
        .allValue('.*'),
    )
    .withRow(new RowBuilder('Right now'))
    .withPanel(
      stat(
        'Stuck PENDING',
        'Leases passed without completion, found by the last sweep (alert: IdempotencyStuckPending).',
        'none',
        `max by (table) (dedup_stuck_pending_total{${TABLE}})`,
      ),
    )
    .withPanel(
      stat(
        'Since the last successful sweep',
        'Alert IdempotencyReconcilerNotRunning past three intervals.',
        's',
        `time() - max by (table) (idempotency_reconciler_last_success_timestamp_seconds{${TABLE}})`,
      ),
    )
    .withPanel(
      stat(
        'Re-executions (24 h)',
        'Handlers that ran for a key already completed: must stay 0 (alert: IdempotencyDuplicateReexecution).',
        'none',
        `sum by (table) (increase(dedup_duplicate_reexecution_total{${TABLE}}[24h]))`,
      ),
    )
    .withPanel(
      stat(
        'Replayed share (1 h)',
        'Duplicates answered from a stored outcome, of every protected call that ran or replayed.',
        'percentunit',
        `sum by (table) (rate(idempotency_requests_total{${TABLE}, outcome="replayed"}[1h])) / sum by (table) (rate(idempotency_requests_total{${TABLE}, outcome=~"executed|replayed"}[1h]))`,
      ),
    )
    .withRow(new RowBuilder('Requests'))
    .withPanel(
      timeSeries(
        'Outcomes',
        'Protected calls by outcome: executed (first run), replayed, in_flight (409), mismatch (422), store_throttled, store_misconfigured …',
        'reqps',
        [query(`sum by (outcome) (rate(idempotency_requests_total{${TABLE}}[$__rate_interval]))`, '{{outcome}}')],
      ),
    )
    .withPanel(
      timeSeries(
        'Calls by transport',
        'Protected calls by how they came in: http, graphql, rpc (message handlers), method (provider methods: queues, events, scheduled jobs), function (execute), sqs, kinesis, dynamodb-streams (Lambda batches).',
        'reqps',
        [query(`sum by (transport) (rate(idempotency_requests_total{${TABLE}}[$__rate_interval]))`, '{{transport}}')],
      ),
    )
    .withPanel(
      timeSeries(
        'Conditional writes refused',
        'ConditionalCheckFailedException by operation: claims follow client retries (alert: IdempotencyRetryStorm); complete/fail are fenced-out workers.',
        'ops',
        [
          query(
            `sum by (operation) (rate(dynamo_conditional_write_rejected_total{${TABLE}}[$__rate_interval]))`,
            '{{operation}}',
          ),
        ],
      ),
    )
    .withPanel(
      timeSeries(
        'Replay cache hit ratio',
        'Share of lookups in the in-process replay cache answered from it, without a DynamoDB call (per process; off when replayCache.enabled is false).',
        'percentunit',
        [
          query(
            `sum by (table) (rate(idempotency_replay_cache_lookups_total{${TABLE}, result="hit"}[$__rate_interval])) / sum by (table) (rate(idempotency_replay_cache_lookups_total{${TABLE}}[$__rate_interval]))`,
            '{{table}}',
          ),
        ],
      ),
    )
    .withPanel(
      timeSeries(
        'Unkeyed side effects',
        'Requests (POST, PUT, PATCH, DELETE) sent without an Idempotency-Key, and DynamoDB writes without a condition, from inside protected calls: a re-run after a crash sends them again (unkeyedCalls; the log names the route and target).',
        'ops',
        [
          query(
            `sum by (kind, operation) (rate(idempotency_unkeyed_calls_total{${TABLE}}[$__rate_interval]))`,
            '{{kind}} {{operation}}',
          ),
        ],
      ),
    )
    .withPanel(
      timeSeries(
        'Steps',
        'Recovery points (IdempotencyContext.step): run (the function ran and its result was recorded), resumed (a retry used the recorded result instead of running it), lease_lost (not started, or not recorded, because the caller had lost its lease: a frozen or partitioned owner).',
        'ops',
        [query(`sum by (result) (rate(idempotency_steps_total{${TABLE}}[$__rate_interval]))`, '{{result}}')],
      ),
    )
    .withRow(new RowBuilder('DynamoDB'))
    .withPanel(
      timeSeries('Store call latency', 'p50, p95 and p99 by operation.', 's', [
        ...[0.5, 0.95, 0.99].map((quantile) =>
          query(
            `histogram_quantile(${quantile}, sum by (le, operation) (rate(idempotency_store_call_duration_seconds_bucket{${TABLE}}[$__rate_interval])))`,
            `{{operation}} p${quantile * 100}`,
          ),
        ),
      ]),
    )
    .withPanel(
      timeSeries(
        'Store calls that failed',
        'By result: throttling (alert: IdempotencyStoreThrottled), misconfiguration and network errors (alert: IdempotencyStoreFailing). Refused conditions are not failures.',
        'ops',
        [
          query(
            `sum by (result) (rate(idempotency_store_call_duration_seconds_count{${TABLE}, result!~"ok|ConditionalCheckFailedException"}[$__rate_interval]))`,
            '{{result}}',
          ),
        ],
      ),
    )
    .withRow(new RowBuilder('Leases and the reconciler'))
    .withPanel(
      timeSeries(
        'Stuck and TTL-stale items',
        'From each sweep: stuck PENDING (alert past 90 s) and items past expires_at not yet deleted by TTL (alert when growing for a day).',
        'none',
        [
          query(`max by (table) (dedup_stuck_pending_total{${TABLE}})`, 'stuck PENDING {{table}}'),
          query(`max by (table) (dynamo_ttl_stale_items_total{${TABLE}})`, 'TTL-stale {{table}}'),
        ],
      ),
    )
    .withPanel(
      timeSeries(
        'Leases lost',
        'Renewals refused (a live owner taken over), re-executions, and benign completion races.',
        'none',
        [
          query(`sum (increase(dedup_lease_renewal_refused_total{${TABLE}}[$__rate_interval]))`, 'renewals refused'),
          query(`sum (increase(dedup_duplicate_reexecution_total{${TABLE}}[$__rate_interval]))`, 're-executions'),
          query(
            `sum (increase(dedup_concurrent_completion_race_total{${TABLE}}[$__rate_interval]))`,
            'completion races (benign)',
          ),
        ],
      ),
    )
    .build();
}

if (process.argv.includes('--write')) {
  const target = join(__dirname, 'idempotency.dashboard.json');
  writeFileSync(target, `${JSON.stringify(idempotencyDashboard(), null, 2)}\n`);
  console.log(`wrote ${target}`);
}
