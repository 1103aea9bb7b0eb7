import { Attributes, context, metrics, ObservableResult, Span, SpanStatusCode, trace } from '@opentelemetry/api';
import type { RequestOutcome } from '../errors/outcomes';
import { CountedSeries, CountedSeriesEntry } from './counted-series';
import { METRICS } from './metrics';
import { OutcomeEvents, ReportedCall } from './outcome-events';

export { METRICS } from './metrics';

const INSTRUMENTATION_SCOPE = 'nestjs-dynamodb-idempotency';

export type StoreOperation =
  'claim' | 'complete' | 'commit' | 'fail' | 'renew' | 'step' | 'get' | 'scan' | 'query' | 'remove';

/**
 * What became of a step (`IdempotencyContext.step`): its function ran, its recorded result was used, or neither (the
 * lease was lost); for an interrupted at-most-once step, what its probe said (done, not done) or that nobody could tell.
 */
export type StepResult = 'run' | 'resumed' | 'lease_lost' | 'probed_done' | 'probed_not_done' | 'outcome_unknown';

/** The reconciler's findings for one table: its last sweep's counts, and when it ended (epoch seconds). */
export interface SweepFindings {
  stuckPending: number;
  ttlStale: number;
  endedAt: number;
}

/** The operations whose refused conditions are counted (a series for each is exported from the start). */
const CONDITIONAL_OPERATIONS = ['claim', 'complete', 'fail', 'renew', 'step'] as const;
const STEP_RESULTS: readonly StepResult[] = [
  'run',
  'resumed',
  'lease_lost',
  'probed_done',
  'probed_not_done',
  'outcome_unknown',
];

/** The metrics kept as plain counts (`CountedSeries`): every counter the module exports. */
type CountedMetric =
  | 'requests'
  | 'conditionalWriteRejected'
  | 'duplicateReexecution'
  | 'completionRace'
  | 'renewalRefused'
  | 'replayCacheLookups'
  | 'unkeyedCalls'
  | 'steps'
  | 'keysPoisoned';

function counted({ name, help }: (typeof METRICS)[CountedMetric]): CountedSeries {
  return CountedSeries.named(name, help, INSTRUMENTATION_SCOPE);
}

/**
 * The metrics and spans an operator watches (docs/operating.md), through the OpenTelemetry API: no-ops until the
 * application registers an SDK (before creating the Nest app), so they cost nothing otherwise and work with any backend.
 * Given the table, every series carries it (`table`), and the counters alerts watch exist from the start at 0.
 */
export class IdempotencyTelemetry {
  private readonly meter = metrics.getMeter(INSTRUMENTATION_SCOPE);
  private readonly tracer = trace.getTracer(INSTRUMENTATION_SCOPE);
  private readonly labels: Attributes;
  private readonly conditionalWriteRejected = counted(METRICS.conditionalWriteRejected);
  private readonly requests = counted(METRICS.requests);
  private readonly replayCacheLookups = counted(METRICS.replayCacheLookups);
  private readonly unkeyedCalls = counted(METRICS.unkeyedCalls);
  private readonly steps = counted(METRICS.steps);
  private readonly duplicateReexecution: CountedSeriesEntry;
  private readonly completionRace: CountedSeriesEntry;
  private readonly renewalRefused: CountedSeriesEntry;
  private readonly keysPoisoned: CountedSeriesEntry;
  /** The per-request series of this table, each looked up once (by the labels' values). */
  private readonly requestSeries = new Map<string, CountedSeriesEntry>();
  private readonly lookupSeries = new Map<string, CountedSeriesEntry>();
  private readonly stepSeries = new Map<string, CountedSeriesEntry>();
  /** Outcome events (`onOutcome`, the diagnostics channel): published from `request`. */
  readonly outcomes = new OutcomeEvents();
  private readonly storeDuration = this.meter.createHistogram(METRICS.storeDuration.name, {
    description: METRICS.storeDuration.help,
    unit: 's',
    advice: { explicitBucketBoundaries: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] },
  });
  /** The store-call histogram's attributes, each made once per table, operation and result. */
  private readonly storeCallAttributes = new Map<string, Attributes>();
  private readonly findings = new Map<string, SweepFindings>();
  private readonly intervals = new Map<string, number>();

  constructor(private readonly table?: string) {
    this.labels = table === undefined ? {} : { table };
    // Series that must stay 0 are exported from the start, so an alert on them has something to watch.
    const own = (metric: (typeof METRICS)[CountedMetric]) => counted(metric).series(table ?? '', this.labels);
    this.duplicateReexecution = own(METRICS.duplicateReexecution);
    this.completionRace = own(METRICS.completionRace);
    this.renewalRefused = own(METRICS.renewalRefused);
    this.keysPoisoned = own(METRICS.keysPoisoned);
    if (table !== undefined) for (const operation of CONDITIONAL_OPERATIONS) this.rejectedSeries(table, operation);
    for (const result of STEP_RESULTS) this.tableSeries(this.steps, this.stepSeries, 'result', result);
    const byTable = (observe: (findings: SweepFindings) => number) => (result: ObservableResult) =>
      this.findings.forEach((findings, name) => result.observe(observe(findings), { table: name }));
    this.gauge(METRICS.stuckPending).addCallback(byTable((findings) => findings.stuckPending));
    this.gauge(METRICS.ttlStale).addCallback(byTable((findings) => findings.ttlStale));
    this.gauge(METRICS.lastSweep).addCallback(byTable((findings) => findings.endedAt));
    this.gauge(METRICS.sweepInterval).addCallback((result) =>
      this.intervals.forEach((seconds, name) => result.observe(seconds, { table: name })),
    );
  }

  /** A lookup in the replay cache: answered from it, or not. */
  replayCacheLookup(hit: boolean): void {
    this.tableSeries(this.replayCacheLookups, this.lookupSeries, 'result', hit ? 'hit' : 'miss').value++;
  }

  /** Counts a protected call's outcome, and publishes it as an outcome event when `call` carries a report. */
  request(outcome: RequestOutcome, call?: ReportedCall, statusCode?: number): void {
    const transport = call?.transport ?? 'function';
    const key = `${outcome}\0${transport}`;
    let entry = this.requestSeries.get(key);
    if (!entry) {
      const labels = { ...this.labels, outcome, transport };
      this.requestSeries.set(key, (entry = this.requests.series(`${this.table ?? ''}\0${key}`, labels)));
    }
    entry.value++;
    this.outcomes.publish(outcome, call, statusCode);
  }

  /**
   * Unkeyed side effects are watched (`unkeyedCalls`): the usual series exist from now on at 0, so an alert on their
   * increase has something to watch.
   */
  watchingUnkeyedCalls(): void {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) this.unkeyedSeries('http', method);
    for (const operation of ['PutItem', 'UpdateItem', 'DeleteItem']) this.unkeyedSeries('dynamodb', operation);
  }

  /** A side effect sent without a key inside a protected call (`unkeyedCalls`). */
  unkeyedCall(kind: 'http' | 'dynamodb', operation: string): void {
    this.unkeyedSeries(kind, operation).value++;
  }

  private unkeyedSeries(kind: 'http' | 'dynamodb', operation: string): CountedSeriesEntry {
    return this.unkeyedCalls.series(`${this.table ?? ''}\0${kind}\0${operation}`, { ...this.labels, kind, operation });
  }

  /** A step of a protected call: run, resumed from its recorded result, or refused for a lost lease. */
  step(result: StepResult): void {
    this.tableSeries(this.steps, this.stepSeries, 'result', result).value++;
  }

  /**
   * Runs a step's function in a span (`idempotency.step`) made the active context, so the calls it makes (a provider's
   * charge) are its children; without a tracer provider, the function is called as it is.
   */
  stepSpan<T>(recordKey: string, name: string, attempt: number, fn: () => Promise<T>): Promise<T> {
    const attributes = { 'idempotency.key': recordKey, 'idempotency.step': name, 'idempotency.step.attempt': attempt };
    const span = this.tracer.startSpan('idempotency.step', { attributes });
    if (!span.isRecording()) return fn();
    return context.with(trace.setSpan(context.active(), span), () => recorded(span, fn));
  }

  conditionRejected(table: string, operation: 'claim' | 'complete' | 'fail' | 'renew' | 'step'): void {
    this.rejectedSeries(table, operation).value++;
  }

  reexecutionDetected(): void {
    this.duplicateReexecution.value++;
  }

  leaseRenewalRefused(): void {
    this.renewalRefused.value++;
  }

  /** A key stored as poisoned (`maxCrashedOwners`): once per poisoning, not per duplicate answered. */
  keyPoisoned(): void {
    this.keysPoisoned.value++;
  }

  completionRaced(): void {
    this.completionRace.value++;
  }

  storeCall(table: string, operation: StoreOperation, seconds: number, result: string): void {
    const key = `${table}\0${operation}\0${result}`;
    let attributes = this.storeCallAttributes.get(key);
    if (!attributes) this.storeCallAttributes.set(key, (attributes = { table, operation, result }));
    this.storeDuration.record(seconds, attributes);
  }

  /** A sweep succeeded: its findings, and when it ended. */
  sweepFound(table: string, findings: SweepFindings): void {
    this.findings.set(table, findings);
  }

  /** The reconciler sweeps `table` every `seconds`. */
  sweepScheduled(table: string, seconds: number): void {
    this.intervals.set(table, seconds);
  }

  /** This table's series of a per-request counter with one more label, looked up once per value. */
  private tableSeries(
    counter: CountedSeries,
    known: Map<string, CountedSeriesEntry>,
    name: string,
    value: string,
  ): CountedSeriesEntry {
    let entry = known.get(value);
    if (!entry)
      known.set(value, (entry = counter.series(`${this.table ?? ''}\0${value}`, { ...this.labels, [name]: value })));
    return entry;
  }

  private rejectedSeries(table: string, operation: string): CountedSeriesEntry {
    return this.conditionalWriteRejected.series(`${table}\0${operation}`, { table, operation });
  }

  private gauge({ name, help }: { name: string; help: string }) {
    return this.meter.createObservableGauge(name, { description: help });
  }

  /**
   * Runs a store call in a span named `name`, with the record key and the call's outcome (`dynamo.condition_result`,
   * from `outcome`); errors mark the span and pass through unchanged. The span is not made the active context: nothing
   * inside starts spans of its own, and activating one costs time on every request. Without a tracer provider the span
   * records nothing, and the call's own promise is handed back as it is.
   */
  storeSpan<T>(name: string, recordKey: string, call: () => Promise<T>, outcome: (result: T) => string): Promise<T> {
    const span = this.tracer.startSpan(name, { attributes: { 'idempotency.key': recordKey } });
    return span.isRecording() ? recorded(span, call, outcome) : call();
  }
}

async function recorded<T>(span: Span, call: () => Promise<T>, outcome?: (result: T) => string): Promise<T> {
  try {
    const result = await call();
    if (outcome) span.setAttribute('dynamo.condition_result', outcome(result));
    return result;
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).name });
    throw error;
  } finally {
    span.end();
  }
}
