import { Attributes, metrics, MeterProvider } from '@opentelemetry/api';

/** One series of a counter: its attributes and its count so far. */
export interface CountedSeriesEntry {
  readonly attributes: Attributes;
  value: number;
}

/**
 * A counter whose series are plain numbers, exported through an OpenTelemetry observable counter when the SDK collects:
 * counting on the request path is an addition, where a synchronous counter hashes its attributes on every `add`.
 * One per metric name in the process, shared by every telemetry instance, as the SDK's own counter would be; exported
 * once per meter provider.
 */
export class CountedSeries {
  private readonly entries = new Map<string, CountedSeriesEntry>();
  private readonly exportedTo = new WeakSet<MeterProvider>();

  private constructor(
    private readonly name: string,
    private readonly description: string,
  ) {}

  private static readonly byName = new Map<string, CountedSeries>();

  /** The counter named `name`, exported to the meter provider registered now (a no-op until there is one). */
  static named(name: string, description: string, meterName: string): CountedSeries {
    let counter = CountedSeries.byName.get(name);
    if (!counter) CountedSeries.byName.set(name, (counter = new CountedSeries(name, description)));
    counter.exportTo(metrics.getMeterProvider(), meterName);
    return counter;
  }

  /** The series with these attributes (kept: look it up once, then add to its `value`). `key` names them uniquely. */
  series(key: string, attributes: Attributes): CountedSeriesEntry {
    let entry = this.entries.get(key);
    if (!entry) this.entries.set(key, (entry = { attributes, value: 0 }));
    return entry;
  }

  private exportTo(provider: MeterProvider, meterName: string): void {
    if (this.exportedTo.has(provider)) return;
    this.exportedTo.add(provider);
    provider
      .getMeter(meterName)
      .createObservableCounter(this.name, { description: this.description })
      .addCallback((result) => this.entries.forEach(({ value, attributes }) => result.observe(value, attributes)));
  }
}
