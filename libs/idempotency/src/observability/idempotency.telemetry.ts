import { Attributes, metrics, Span, SpanStatusCode, trace } from '@opentelemetry/api';
import type { RequestOutcome } from '../errors/outcomes';

const INSTRUMENTATION_SCOPE = 'nestjs-dynamodb-idempotency';

export type StoreOperation = 'claim' | 'complete' | 'commit' | 'fail' | 'renew' | 'get' | 'scan' | 'query' | 'remove';

/** The reconciler's last findings for one table. */
export interface SweepFindings {
  stuckPending: number;
  ttlStale: number;
}

/**
 * The metrics and spans an operator watches (docs/operating.md), through the OpenTelemetry API: no-ops until the application registers an
 * SDK (before creating the Nest app), so they cost nothing otherwise and work with any backend.
 */
export class IdempotencyTelemetry {
  private readonly meter = metrics.getMeter(INSTRUMENTATION_SCOPE);
  private readonly tracer = trace.getTracer(INSTRUMENTATION_SCOPE);
  private readonly conditionalWriteRejected = this.meter.createCounter('dynamo_conditional_write_rejected_total', {
    description: 'ConditionalCheckFailedException answers, by table and operation (claim, complete, fail)',
  });
  private readonly duplicateReexecution = this.meter.createCounter('dedup_duplicate_reexecution_total', {
    description: 'Handlers that ran for a key another claim had already COMPLETED (must stay 0)',
  });
  private readonly completionRace = this.meter.createCounter('dedup_concurrent_completion_race_total', {
    description: 'Benign races on PENDING → COMPLETED: the same claim had already completed the record',
  });
  private readonly renewalRefused = this.meter.createCounter('dedup_lease_renewal_refused_total', {
    description:
      'Lease renewals refused because another claim had taken the key over (the owner was paused past its lease)',
  });
  private readonly requests = this.meter.createCounter('idempotency_requests_total', {
    description: 'Requests on idempotent routes, by outcome',
  });
  private readonly storeDuration = this.meter.createHistogram('idempotency_store_call_duration_seconds', {
    description: 'Latency of idempotency store calls, by table, operation and result',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] },
  });
  private readonly findings = new Map<string, SweepFindings>();

  constructor() {
    // Series that must stay 0 are exported from the start, so an alert on them has something to watch.
    this.duplicateReexecution.add(0);
    this.completionRace.add(0);
    this.renewalRefused.add(0);
    const stuck = this.meter.createObservableGauge('dedup_stuck_pending_total', {
      description: 'PENDING items whose lease has passed, found by the last reconciler sweep',
    });
    const stale = this.meter.createObservableGauge('dynamo_ttl_stale_items_total', {
      description: 'Items past expires_at still present (TTL deletion lags), found by the last reconciler sweep',
    });
    stuck.addCallback((result) => this.findings.forEach((f, table) => result.observe(f.stuckPending, { table })));
    stale.addCallback((result) => this.findings.forEach((f, table) => result.observe(f.ttlStale, { table })));
  }

  request(outcome: RequestOutcome): void {
    this.requests.add(1, { outcome });
  }

  conditionRejected(table: string, operation: 'claim' | 'complete' | 'fail' | 'renew'): void {
    this.conditionalWriteRejected.add(1, { table, operation });
  }

  reexecutionDetected(): void {
    this.duplicateReexecution.add(1);
  }

  leaseRenewalRefused(): void {
    this.renewalRefused.add(1);
  }

  completionRaced(): void {
    this.completionRace.add(1);
  }

  storeCall(table: string, operation: StoreOperation, seconds: number, result: string): void {
    this.storeDuration.record(seconds, { table, operation, result });
  }

  sweepFound(table: string, findings: SweepFindings): void {
    this.findings.set(table, findings);
  }

  /**
   * Runs `work` in a span; errors mark the span and pass through unchanged. The span is not made the active
   * context: nothing inside starts spans of its own, and activating one costs time on every request.
   */
  async span<T>(name: string, attributes: Attributes, work: (span: Span) => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan(name, { attributes });
    try {
      return await work(span);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).name });
      throw error;
    } finally {
      span.end();
    }
  }
}
