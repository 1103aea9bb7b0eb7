import { metrics, trace } from '@opentelemetry/api';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

/**
 * Registers OpenTelemetry SDKs for this test file (Jest gives each file its own globals): metrics read through a
 * Prometheus exporter, spans kept in memory. Call before creating the Nest app.
 */
export function registerTestTelemetry() {
  const reader = new PrometheusExporter({ preventServerStart: true });
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  const spans = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
  return {
    spans,
    scrape: async () => new PrometheusSerializer().serialize((await reader.collect()).resourceMetrics),
  };
}

/** The sum of the series of `name` whose labels include `labels` (`metricValue(text, 'x_total', { outcome: 'replayed' })`); 0 if none. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const series = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map(([, k, v]) => [k, v]));
    if (Object.entries(labels).every(([key, value]) => series[key] === value)) sum += Number(match[3]);
  }
  return sum;
}
