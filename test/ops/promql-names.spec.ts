import { METRICS } from '../../libs/idempotency/src/observability/idempotency.telemetry';
import { THROTTLING_ERRORS } from '../../libs/idempotency/src/dynamodb/dynamodb-errors';
import { committedDashboard, dashboardQueries, metricNames, rules } from './promql';

/** What the module exports, from its telemetry code: each metric, a histogram as its three series. */
const EXPORTED = new Set(
  Object.values(METRICS).flatMap(({ name, kind }) =>
    kind === 'histogram' ? [`${name}_bucket`, `${name}_count`, `${name}_sum`] : [name],
  ),
);
const RECORDED = new Set(rules().groups.flatMap((group) => group.rules.flatMap((rule) => rule.record ?? [])));

const ruleQueries = rules().groups.flatMap((group) =>
  group.rules.map((rule) => ({ where: `rule ${rule.alert ?? rule.record}`, expr: rule.expr })),
);

describe('the PromQL of the alert rules and the dashboard', () => {
  it.each([...ruleQueries, ...dashboardQueries(committedDashboard())])(
    '$where parses and uses only metrics the module exports or the rules record',
    ({ expr }) => {
      const names = metricNames(expr);
      expect(names.length).toBeGreaterThan(0);
      expect(names.filter((name) => !EXPORTED.has(name) && !RECORDED.has(name))).toEqual([]);
    },
  );

  it('finds names however they are selected, and refuses what is not PromQL', () => {
    expect(
      metricNames('sum by (table) (rate(a_total{x="1"}[$__rate_interval])) / {__name__="b"} or absent(c)'),
    ).toEqual(['a_total', 'b', 'c']);
    expect(() => metricNames('sum(rate(a_total[5m])')).toThrow(/PromQL syntax error/);
  });

  it('the throttling alert names every error the module treats as throttling', () => {
    const throttled = rules()
      .groups.flatMap((group) => group.rules)
      .find((rule) => rule.alert === 'IdempotencyStoreThrottled')!;
    const pattern = /result=~"([^"]+)"/.exec(throttled.expr)![1];
    expect(new Set(pattern.split('|'))).toEqual(THROTTLING_ERRORS);
  });

  it('every alert has a severity, a summary, a description and a runbook entry', () => {
    const alerts = rules()
      .groups.flatMap((group) => group.rules)
      .filter((rule) => rule.alert) as {
      alert: string;
      labels?: { severity?: string };
      annotations?: Record<string, string>;
    }[];
    expect(alerts.length).toBeGreaterThanOrEqual(8);
    for (const { alert, labels, annotations } of alerts) {
      expect({ alert, severity: labels?.severity }).toEqual({
        alert,
        severity: expect.stringMatching(/^(warning|critical)$/),
      });
      expect(annotations).toMatchObject({
        summary: expect.any(String),
        description: expect.any(String),
        runbook_url: `docs/operating.md#${alert.toLowerCase()}`,
      });
    }
  });
});
