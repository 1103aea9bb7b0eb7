import { ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Report } from '../../libs/idempotency/src/conformance/report';
import { runConformance } from '../../libs/idempotency/src/conformance/run';
import { freePort } from '../support/free-port';

/** A Node.js server script (`--port N` and `args`) on a free port, ready once it printed its first line. */
export async function startServer(script: string, args: string[] = []) {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [script, '--port', String(port), ...args], {
    env: {
      ...process.env,
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`${script} ${args.join(' ')} exited (${code})`)));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    stop: async () => {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Runs the kit in this process (its --json report in `work`): its exit code, what it printed, and the report. */
export async function conformance(work: string, args: string[]) {
  const json = join(work, `report-${Math.random().toString(36).slice(2)}.json`);
  const lines: string[] = [];
  const errors: string[] = [];
  const code = await runConformance([...args, '--json', json, '--quiet'], {
    log: (line) => lines.push(line),
    error: (line) => errors.push(line),
  });
  const report = code === 2 ? undefined : (JSON.parse(readFileSync(json, 'utf8')) as Report);
  return { code, text: lines.join('\n'), errors: errors.join('\n'), report, json };
}

export const failed = (report: Report) =>
  report.results.filter((each) => each.status === 'fail').map((each) => each.check);
export const skipped = (report: Report) =>
  report.results.filter((each) => each.status === 'skip').map((each) => each.check);
