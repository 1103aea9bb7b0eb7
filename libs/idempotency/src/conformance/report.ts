import type { Outcome } from './checks';
import type { ConformanceOptions } from './options';
import type { Requirement } from './profiles';

/** One requirement judged in one run of the scenarios. */
export type Result = Outcome & Requirement & { run: number; scenario: string; says: string; ms: number };

/** The run as `--json` writes it (docs/conformance.schema.json). */
export interface Report {
  tool: 'nestjs-dynamodb-idempotency conformance';
  version: string;
  profile: string;
  target: string;
  seed: number;
  keyPrefix: string;
  repeat: number;
  startedAt: string;
  durationMs: number;
  summary: { passed: number; failed: number; skipped: number };
  results: Result[];
}

export function report(options: ConformanceOptions, version: string, startedAt: Date, results: Result[]): Report {
  const count = (status: Outcome['status']) => results.filter((each) => each.status === status).length;
  return {
    tool: 'nestjs-dynamodb-idempotency conformance',
    version,
    profile: options.profile,
    target: options.mcp ? `MCP ${options.url} tool ${options.mcp.tool}` : `${options.method} ${options.url}`,
    seed: options.seed,
    keyPrefix: options.keyPrefix,
    repeat: options.repeat,
    startedAt: startedAt.toISOString(),
    durationMs: Date.now() - startedAt.getTime(),
    summary: { passed: count('pass'), failed: count('fail'), skipped: count('skip') },
    results,
  };
}

/** The table a person reads: one line per requirement, what broke under it, and how to replay the run. */
export function table(run: Report): string[] {
  const mark = { pass: 'PASS', fail: 'FAIL', skip: 'SKIP' } as const;
  const lines = [`conformance: ${run.target}, profile ${run.profile}`, ''];
  for (const each of run.results) {
    const prefix = run.repeat > 1 ? `#${each.run} ` : '';
    lines.push(`${mark[each.status]}  ${prefix}${each.check.padEnd(28)} ${each.level.padEnd(12)} ${each.says}`);
    if (each.status === 'fail') lines.push(`      ${each.detail}`, `      breaks: ${each.source}`);
    else if (each.detail) lines.push(`      ${each.detail}`);
  }
  const { passed, failed, skipped } = run.summary;
  lines.push(
    '',
    `${passed} passed, ${failed} failed, ${skipped} skipped in ${(run.durationMs / 1000).toFixed(1)} s`,
    `replay: --seed ${run.seed} --key-prefix ${run.keyPrefix} (on a server that has not seen these keys)`,
  );
  return lines;
}

const escape = (text: string) =>
  text.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);

/** The run as JUnit XML: a test suite per run of the scenarios, a test case per requirement. */
export function junit(run: Report): string {
  const runs = [...new Set(run.results.map((each) => each.run))];
  const seconds = (ms: number) => (ms / 1000).toFixed(3);
  const suites = runs.map((number) => {
    const results = run.results.filter((each) => each.run === number);
    const cases = results.map((each) => {
      const name = escape(`${each.check}: ${each.says}`);
      const open = `    <testcase classname="${escape(`conformance.${run.profile}.${each.scenario}`)}" name="${name}" time="${seconds(each.ms)}"`;
      if (each.status === 'pass') return `${open}/>`;
      if (each.status === 'skip') return `${open}>\n      <skipped message="${escape(each.detail)}"/>\n    </testcase>`;
      const message = escape(`${each.detail} (breaks ${each.source})`);
      return `${open}>\n      <failure message="${message}" type="${each.level}">${message}</failure>\n    </testcase>`;
    });
    const count = (status: Outcome['status']) => results.filter((each) => each.status === status).length;
    const time = seconds(results.reduce((sum, each) => sum + each.ms, 0));
    return (
      `  <testsuite name="${escape(`${run.profile} #${number}: ${run.target}`)}" tests="${results.length}" ` +
      `failures="${count('fail')}" errors="0" skipped="${count('skip')}" time="${time}" timestamp="${run.startedAt.slice(0, 19)}">\n` +
      `${cases.join('\n')}\n  </testsuite>`
    );
  });
  const { passed, failed, skipped } = run.summary;
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n` +
    `<testsuites name="conformance" tests="${passed + failed + skipped}" failures="${failed}" errors="0" ` +
    `skipped="${skipped}" time="${seconds(run.durationMs)}">\n${suites.join('\n')}\n</testsuites>\n`
  );
}
