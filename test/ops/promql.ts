import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { load } from 'js-yaml';

const OPS = join(__dirname, '..', '..', 'ops');

export interface RuleFile {
  groups: { name: string; rules: { record?: string; alert?: string; expr: string; for?: string }[] }[];
}

export const rules = (): RuleFile =>
  load(readFileSync(join(OPS, 'prometheus/idempotency.rules.yml'), 'utf8')) as RuleFile;

export const committedDashboard = (): unknown =>
  JSON.parse(readFileSync(join(OPS, 'grafana/idempotency.dashboard.json'), 'utf8'));

/** Every PromQL expression of the dashboard's panels and variables, each with where it is. */
export function dashboardQueries(dashboard: unknown): { where: string; expr: string }[] {
  const { panels = [], templating } = dashboard as {
    panels?: { title: string; targets?: { expr?: string }[] }[];
    templating?: { list?: { name: string; query?: unknown }[] };
  };
  const fromPanels = panels.flatMap(({ title, targets = [] }) =>
    targets.filter((target) => target.expr).map((target) => ({ where: `panel "${title}"`, expr: target.expr! })),
  );
  const fromVariables = (templating?.list ?? []).flatMap(({ name, query }) => {
    const labelValues = typeof query === 'string' ? /^label_values\((.+),\s*\w+\)$/.exec(query) : null;
    return labelValues ? [{ where: `variable $${name}`, expr: labelValues[1] }] : [];
  });
  return [...fromPanels, ...fromVariables];
}

/** Grafana's variables replaced by values PromQL accepts, as Grafana does before sending a query. */
const withVariables = (expr: string) => expr.replace(/\$__rate_interval/g, '5m').replace(/\$\w+/g, 'x');

/**
 * The metric names an expression selects (`name{…}` or `{__name__="name"}`), parsed with Prometheus's own grammar;
 * throws on a syntax error.
 */
export function metricNames(expr: string): string[] {
  const text = withVariables(expr);
  const names: string[] = [];
  const errors: string[] = [];
  parser.parse(text).iterate({
    enter(node) {
      if (node.type.isError) errors.push(`at ${node.from}: "${text.slice(node.from, node.to + 10)}"`);
      if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector') {
        names.push(text.slice(node.from, node.to));
      }
      if (node.name === 'UnquotedLabelMatcher' && text.slice(node.from, node.to).startsWith('__name__')) {
        names.push(JSON.parse(text.slice(node.from, node.to).replace(/^__name__\s*=\s*/, '')));
      }
    },
  });
  if (errors.length > 0) throw new Error(`PromQL syntax error in ${expr}: ${errors.join('; ')}`);
  return names;
}
