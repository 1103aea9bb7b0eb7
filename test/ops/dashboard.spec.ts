import { idempotencyDashboard } from '../../ops/grafana/dashboard';
import { committedDashboard } from './promql';

describe('the Grafana dashboard', () => {
  it('is what ops/grafana/dashboard.ts builds (regenerate with npm run ops:dashboard)', () => {
    expect(committedDashboard()).toEqual(JSON.parse(JSON.stringify(idempotencyDashboard())));
  });

  it('has a datasource variable and a table variable that every query filters on', () => {
    const dashboard = committedDashboard() as {
      templating: { list: { name: string; type: string }[] };
      panels: { type: string; targets?: { expr: string; datasource: { uid: string } }[] }[];
    };
    expect(dashboard.templating.list.map(({ name, type }) => [name, type])).toEqual([
      ['datasource', 'datasource'],
      ['table', 'query'],
    ]);
    const targets = dashboard.panels.flatMap((panel) => panel.targets ?? []);
    expect(targets.length).toBeGreaterThan(10);
    for (const target of targets) {
      expect(target.expr).toContain('table=~"$table"');
      expect(target.datasource.uid).toBe('${datasource}');
    }
  });
});
