import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildLibrary, runCli } from './built-cli';
import { localClient, uniqueTableName } from './dynalite';
import { Engine, startStore } from './engines';
import { ScriptProcess, startScript } from './script-process';
import { createIdempotencyTable, createTableWithKey } from './table';

export interface FleetInstance {
  url: string;
  pid: number;
  exited: Promise<void>;
  process: ScriptProcess;
}

export interface ScriptFleet {
  /** What every instance gets: DYNAMODB_ENDPOINT, IDEMPOTENCY_TABLE and the file (`file`) its effects go to. */
  readonly env: Record<string, string>;
  /** One more process of the script, with `extra` added to `env`. */
  start(extra?: Record<string, string>): Promise<FleetInstance>;
  /** The lines of the effects file that `keep` keeps (the suite's tests share the file, and run in any order). */
  lines(keep: (line: string) => boolean): string[];
  /** The built CLI (`cli: true` builds it) on the fleet's table and store. */
  cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
}

/**
 * Processes of one app script (`startScript`) against a store and a table of their own, for the suites that kill
 * instances and send the client's retry to another. The script appends what its handlers did to the file the
 * environment variable `file` names. `ttl: false` leaves the table without a TTL attribute (DynamoDB Local's sweeper
 * would delete a dead owner's record). Registers its own `beforeAll` and `afterAll`: every process started is
 * SIGKILLed, then the store stopped and the folder removed.
 */
export function scriptFleet(options: {
  script: string;
  name: string;
  file: 'RUNS_FILE' | 'EFFECTS_FILE';
  engine?: Engine;
  ttl?: boolean;
  cli?: boolean;
}): ScriptFleet {
  const env: Record<string, string> = {};
  const started: ScriptProcess[] = [];
  let folder = '';
  let stop = async () => undefined as void;
  let flags: string[] = [];

  beforeAll(async () => {
    if (options.cli) buildLibrary();
    const store = await startStore(options.engine ?? 'dynalite');
    stop = store.stop;
    folder = mkdtempSync(join(tmpdir(), `${options.name}-`));
    const tableName = uniqueTableName(options.name);
    const client = localClient(store.endpoint);
    await (options.ttl === false
      ? createTableWithKey(client, tableName, 'pk')
      : createIdempotencyTable(client, tableName));
    Object.assign(env, {
      DYNAMODB_ENDPOINT: store.endpoint,
      IDEMPOTENCY_TABLE: tableName,
      [options.file]: join(folder, 'effects'),
    });
    writeFileSync(join(folder, 'config.json'), JSON.stringify({ tableName }));
    flags = ['--config', join(folder, 'config.json'), '--endpoint', store.endpoint, '--region', 'us-east-1'];
  }, 180_000);
  afterAll(async () => {
    await Promise.all(started.map((each) => each.kill()));
    await stop();
    rmSync(folder, { recursive: true, force: true });
  });

  return {
    env,
    start: async (extra = {}) => {
      const script = await startScript(options.script, { ...env, ...extra });
      started.push(script);
      return {
        url: (script.ready as { url: string }).url,
        pid: script.child.pid!,
        exited: script.exited,
        process: script,
      };
    },
    lines: (keep) =>
      readFileSync(env[options.file], { encoding: 'utf8', flag: 'a+' }).split('\n').filter(Boolean).filter(keep),
    cli: (args) => runCli([...args, ...flags]),
  };
}

/**
 * The client's retry while a dead owner's lease runs: `send` again, 200 ms apart, while it answers 409, until another
 * answer (or a lost connection, or 60 tries).
 */
export async function pastLease<T>(send: () => Promise<T | 'connection lost'>): Promise<T | 'connection lost'> {
  for (let tries = 0; ; tries++) {
    const answer = await send();
    if (answer === 'connection lost' || (answer as { status: number }).status !== 409 || tries >= 60) return answer;
    await sleep(200);
  }
}
