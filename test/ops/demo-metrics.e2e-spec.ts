import { configFromEnv } from '../../apps/orders-api/src/config';
import { RunningOrdersApi, startOrdersApi } from '../../apps/orders-api/src/orders-api';
import { post } from '../support/app';
import { committedDashboard, dashboardQueries, metricNames, rules } from './promql';

/** The names the rules and the dashboard select that no recording rule makes: Prometheus must scrape each. */
function scrapedNamesUsed(): string[] {
  const groups = rules().groups;
  const recorded = new Set(groups.flatMap((group) => group.rules.flatMap((rule) => rule.record ?? [])));
  const queries = [...groups.flatMap((group) => group.rules), ...dashboardQueries(committedDashboard())];
  return [...new Set(queries.flatMap(({ expr }) => metricNames(expr)))].filter((name) => !recorded.has(name)).sort();
}

/** The metric names with at least one sample in Prometheus text. */
const sampled = (text: string) =>
  new Set(text.split('\n').flatMap((line) => /^([a-zA-Z_:][\w:]*)(?:\{.*\})? \S+/.exec(line)?.[1] ?? []));

describe('the demo’s GET /metrics, after one request and one sweep', () => {
  let api: RunningOrdersApi;
  beforeAll(async () => {
    // RECONCILE_INTERVAL_SECONDS is left at the demo's default (60): a sweep at start, then every minute.
    api = await startOrdersApi(configFromEnv({ PORT: '0' }), { logger: false });
  });
  afterAll(() => api.close());

  it('exposes every series the alert rules and the dashboard use', async () => {
    expect(
      (await post(`${api.url}/orders`, { item: 'lamp', quantity: 1 }, { 'Idempotency-Key': 'metrics-one' })).status,
    ).toBe(201);
    let text = '';
    for (let attempt = 0; attempt < 50; attempt++) {
      text = await (await fetch(`${api.url}/metrics`)).text();
      if (sampled(text).has('idempotency_reconciler_last_success_timestamp_seconds')) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const used = scrapedNamesUsed();
    expect(used.length).toBeGreaterThanOrEqual(10);
    expect(used.filter((name) => !sampled(text).has(name))).toEqual([]);
    expect(text).toMatch(/^idempotency_reconciler_interval_seconds\{table="idempotency_keys"[^}]*\} 60$/m);
  });
});
