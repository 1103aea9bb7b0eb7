import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHECKS, Outcome } from './checks';
import { HttpTarget, Target, TargetError } from './http-target';
import { killWindow, ServerProcess } from './kill-window';
import { McpTarget } from './mcp-target';
import { CONFORMANCE_HELP, ConformanceOptions, parseConformanceArgs, UsageError } from './options';
import { PROFILES } from './profiles';
import { Random } from './random';
import { junit, report, Result, table } from './report';
import { Facts, Scenario, SCENARIOS } from './scenarios';

/** Where the kit writes: the results on `log`, problems on `error`, the progress line on `progress`. */
export interface ConformanceOutput {
  log(line: string): void;
  error(line: string): void;
  progress?(line: string): void;
}

/**
 * `nestjs-dynamodb-idempotency conformance`: runs the scenarios against the target, judges each by the profile's
 * requirements and reports. Returns the exit code: 0 every requirement met, 1 one broken, 2 usage or a target that
 * cannot be checked. Imports nothing but Node.js: it runs where NestJS and the AWS SDK are not installed.
 */
export async function runConformance(argv: string[], out: ConformanceOutput = console): Promise<number> {
  let options: ConformanceOptions | undefined;
  try {
    options = parseConformanceArgs(argv);
    if (!options) {
      out.log(CONFORMANCE_HELP);
      return 0;
    }
    checkOnly(options);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    out.error(`${error.message}\n\n${CONFORMANCE_HELP}`);
    return 2;
  }
  const startedAt = new Date();
  const server = options.start
    ? new ServerProcess(options.start, options.readyUrl ?? new URL('/', options.url).href)
    : undefined;
  const direct: Target = options.mcp ? new McpTarget(options) : new HttpTarget(options);
  const target = reached(direct, options.url);
  const random = new Random(options.seed);
  const results: Result[] = [];
  try {
    if (server) await server.start();
    const scenarios = selected(options, server, direct);
    for (let run = 1; run <= options.repeat; run++) {
      let keys = 0;
      const key = () => `${options.keyPrefix}-${run}-${++keys}`;
      for (const [i, scenario] of scenarios.entries()) {
        if (!options.quiet)
          out.progress?.(
            `[${i + 1}/${scenarios.length}${options.repeat > 1 ? ` run ${run}/${options.repeat}` : ''}] ${scenario.name}: ${scenario.summary}`,
          );
        const began = Date.now();
        const facts = await scenario.run({ target, options, random, key });
        const ms = Date.now() - began;
        for (const requirement of PROFILES[options.profile]) {
          const check = CHECKS[requirement.check];
          if (check.scenario !== scenario.name) continue;
          const outcome: Outcome = facts.skipped ? { status: 'skip', detail: facts.skipped } : check.judge(facts);
          results.push({ ...requirement, run, scenario: scenario.name, says: check.says, ms, ...outcome });
        }
      }
    }
  } catch (error) {
    if (!(error instanceof TargetError)) throw error;
    out.error(`The target cannot be checked: ${error.message}`);
    return 2;
  } finally {
    await server?.kill();
  }
  const run = report(options, version(), startedAt, results);
  if (options.json) write(options.json, `${JSON.stringify(run, null, 2)}\n`, out);
  if (options.junit) write(options.junit, junit(run), out);
  if (options.json !== '-' && options.junit !== '-') table(run).forEach((line) => out.log(line));
  return run.summary.failed > 0 ? 1 : 0;
}

/**
 * The target, refusing to judge one that never answered: the run's first request without an answer (refused, timed
 * out) is a `TargetError` (exit 2), not a row of failures. The kill window's dropped connections come later, on purpose.
 */
function reached(target: Target, url: string): Target {
  let answered = false;
  return {
    send: async (request) => {
      const answer = await target.send(request);
      if (!answered && answer.status === 0) throw new TargetError(`${url} did not answer (${answer.error})`);
      answered = true;
      return answer;
    },
    effects: (key) => target.effects(key),
  };
}

/**
 * The scenarios to run: those the profile judges (or `--only`'s of them), the kill window last (skipped without
 * `--start`; its target unchecked).
 */
function selected(options: ConformanceOptions, server: ServerProcess | undefined, direct: Target): Scenario[] {
  const kill: Scenario = {
    name: 'kill-window',
    summary: `the server SIGKILLed ${options.killDelays.join(', ')} ms after a request, then the request retried`,
    async run(context): Promise<Facts> {
      if (!server) return { skipped: 'give --start (and --ready-url) to run the kill window' };
      if (!options.effectsUrl) return { skipped: 'the kill window judges by effects: give --effects-url' };
      return { rungs: await killWindow({ ...context, target: direct }, server) };
    },
  };
  // A scenario the profile judges nothing of is not sent at all.
  const judged = new Set(PROFILES[options.profile].map((each) => CHECKS[each.check].scenario));
  return [...SCENARIOS, kill].filter(
    (each) => judged.has(each.name) && (!options.only || options.only.includes(each.name)),
  );
}

function checkOnly(options: ConformanceOptions): void {
  const names = [...SCENARIOS.map((each) => each.name), 'kill-window'];
  const unknown = options.only?.filter((name) => !names.includes(name)) ?? [];
  if (unknown.length > 0)
    throw new UsageError(`--only: no scenario ${unknown.join(', ')} (there are ${names.join(', ')})`);
}

function write(path: string, text: string, out: ConformanceOutput): void {
  if (path === '-') out.log(text.trimEnd());
  else writeFileSync(path, text);
}

function version(): string {
  try {
    return (JSON.parse(readFileSync(join(__dirname, '../../package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
