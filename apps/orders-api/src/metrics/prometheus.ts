import { metrics } from '@opentelemetry/api';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

let exporter: PrometheusExporter | undefined;

/**
 * Registers the OpenTelemetry metrics SDK with a Prometheus exporter (no server of its own: the app serves
 * GET /metrics). Once per process, before the Nest app is created, so the module's instruments are live.
 */
export function registerPrometheusMetrics(): PrometheusExporter {
  if (!exporter) {
    exporter = new PrometheusExporter({ preventServerStart: true });
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [exporter] }));
  }
  return exporter;
}

/** Everything recorded so far, in the Prometheus text format. */
export async function scrape(): Promise<string> {
  const { resourceMetrics } = await registerPrometheusMetrics().collect();
  return new PrometheusSerializer().serialize(resourceMetrics);
}
