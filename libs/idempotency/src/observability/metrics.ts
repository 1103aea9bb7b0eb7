/**
 * Every metric the module exports, by name: what the alerting rules and the dashboard in ops/ may use (a test parses
 * their PromQL against this). A histogram is exported as `_bucket`, `_count` and `_sum` series.
 */
export const METRICS = {
  requests: {
    name: 'idempotency_requests_total',
    kind: 'counter',
    help: 'Protected calls, by table, outcome and transport',
  },
  conditionalWriteRejected: {
    name: 'dynamo_conditional_write_rejected_total',
    kind: 'counter',
    help: 'ConditionalCheckFailedException answers, by table and operation (claim, complete, fail, renew, step)',
  },
  duplicateReexecution: {
    name: 'dedup_duplicate_reexecution_total',
    kind: 'counter',
    help: 'Handlers that ran for a key another claim had already COMPLETED (must stay 0)',
  },
  completionRace: {
    name: 'dedup_concurrent_completion_race_total',
    kind: 'counter',
    help: 'Benign races on PENDING → COMPLETED: the same claim had already completed the record',
  },
  renewalRefused: {
    name: 'dedup_lease_renewal_refused_total',
    kind: 'counter',
    help: 'Lease renewals refused because another claim had taken the key over (the owner was paused past its lease)',
  },
  replayCacheLookups: {
    name: 'idempotency_replay_cache_lookups_total',
    kind: 'counter',
    help: 'Lookups in the in-process replay cache, by table and result (hit: answered without DynamoDB; miss)',
  },
  unkeyedCalls: {
    name: 'idempotency_unkeyed_calls_total',
    kind: 'counter',
    help: 'Side effects protected calls sent without a key (unkeyedCalls), by kind (http, dynamodb) and operation',
  },
  steps: {
    name: 'idempotency_steps_total',
    kind: 'counter',
    help: 'Steps of protected calls, by table and result (run: its function ran and was recorded; resumed: its recorded result was used; lease_lost: not started, or not recorded, because the caller had lost its lease)',
  },
  keysPoisoned: {
    name: 'idempotency_keys_poisoned_total',
    kind: 'counter',
    help: 'Keys stored as poisoned (key-poisoned): a claim found maxCrashedOwners owners before it had crashed on the key',
  },
  storeDuration: {
    name: 'idempotency_store_call_duration_seconds',
    kind: 'histogram',
    help: 'Latency of idempotency store calls, by table, operation and result',
  },
  stuckPending: {
    name: 'dedup_stuck_pending_total',
    kind: 'gauge',
    help: 'PENDING items whose lease has passed, found by the last reconciler sweep',
  },
  ttlStale: {
    name: 'dynamo_ttl_stale_items_total',
    kind: 'gauge',
    help: 'Items past expires_at still present (TTL deletion lags), found by the last reconciler sweep',
  },
  lastSweep: {
    name: 'idempotency_reconciler_last_success_timestamp_seconds',
    kind: 'gauge',
    help: 'When the last successful reconciler sweep ended (Unix seconds)',
  },
  sweepInterval: {
    name: 'idempotency_reconciler_interval_seconds',
    kind: 'gauge',
    help: 'How often the reconciler is meant to sweep (its schedule, in seconds)',
  },
} as const;
