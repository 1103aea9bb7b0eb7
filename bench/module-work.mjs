// bench/module-cpu.ts run for each store, and its section of bench/RESULTS.md. Used by bench.mjs.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { f0, median, show } from './stats.mjs';

const root = new URL('..', import.meta.url).pathname;

/** Calls per warm-up and per round: under callgrind a call is about 50 times slower. */
const COUNTS = {
  callgrind: { memory: [10_000, 4_000], dynamodb: [3_000, 600] },
  cpu: { memory: [120_000, 40_000], dynamodb: [20_000, 10_000] },
};
const ROUNDS = 5;

const available = (command, args) => spawnSync(command, args, { stdio: 'ignore' }).status === 0;

/**
 * bench/module-cpu.ts for the in-memory and the DynamoDB store: under valgrind's callgrind when it is on PATH
 * (instructions per call, V8 single-threaded so that its GC and compiler run in the counted thread), else CPU time,
 * pinned to one core when `taskset` is there (or with BENCH_MODULE_WORK=cpu).
 */
export function measureModuleWork() {
  // BENCH_MODULE_WORK=cpu: CPU time even with valgrind there (a quicker look).
  const mode = process.env.BENCH_MODULE_WORK !== 'cpu' && available('valgrind', ['--version']) ? 'callgrind' : 'cpu';
  const pinned = mode === 'cpu' && available('taskset', ['-c', '0', 'true']);
  return {
    mode,
    pinned,
    stores: ['memory', 'dynamodb'].map((store) => {
      const dir = mkdtempSync(join(tmpdir(), 'bench-module-'));
      const out = join(dir, 'callgrind.out');
      const [warmUp, calls] = COUNTS[mode][store];
      const node = [process.execPath, `${root}test/support/run-ts.cjs`, `${root}bench/module-cpu.ts`];
      const [command, ...args] =
        mode === 'callgrind'
          ? [
              'valgrind',
              '--tool=callgrind',
              `--callgrind-out-file=${out}`,
              node[0],
              '--single-threaded',
              ...node.slice(1),
            ]
          : pinned
            ? ['taskset', '-c', '1', ...node]
            : node;
      const output = execFileSync(command, args, {
        cwd: dir,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        env: {
          ...process.env,
          MODULE_CPU_STORE: store,
          MODULE_CPU_WARM_UP_CALLS: String(warmUp),
          MODULE_CPU_CALLS: String(calls),
          MODULE_CPU_ROUNDS: String(ROUNDS),
          ...(mode === 'callgrind' ? { MODULE_CPU_CALLGRIND: out } : {}),
        },
      });
      const result = JSON.parse(output.trim().split('\n').at(-1));
      console.log(`module work (${store}, ${result.unit}): module ${f0(result.module)}, floor ${f0(result.floor)}`);
      return result;
    }),
  };
}

/**
 * The module's median over its floor's, with the range of the per-round ratios: a round that meets a major garbage
 * collection of the heap counts several times the others, so the medians are compared, not the rounds.
 */
export function workRatio({ runs }) {
  const ratios = runs.module.map((value, i) => value / runs.floor[i]);
  return { median: median(runs.module) / median(runs.floor), min: Math.min(...ratios), max: Math.max(...ratios) };
}

export function moduleWorkSection(work) {
  if (!work) return '';
  const unit = work.mode === 'callgrind' ? 'thousand instructions per call' : 'CPU µs per call';
  const how =
    work.mode === 'callgrind'
      ? "counted in instructions (valgrind's callgrind, V8 with `--single-threaded` so that its garbage collector and compiler run in the counted thread): a count the virtual machine's speed does not move, unlike the CPU time of the HTTP runs. Instructions are not time: a cache miss costs no more than a hit here, so memory-bound work (a large Map, the garbage collector's marking) weighs less than in the HTTP runs"
      : `in CPU time${work.pinned ? ', pinned to one core' : ''} (no instruction counts: valgrind not on PATH, or \`BENCH_MODULE_WORK=cpu\`)`;
  const label = { memory: 'in-memory store', dynamodb: 'DynamoDB (a client answering at once)' };
  const floor = { memory: '`/bench/floor-memory`', dynamodb: '`/bench/floor-intercepted`' };
  // The same harness run on the code before this round of cuts (bench/before/module-work.json), when measured alike.
  const beforeFile = new URL('./before/module-work.json', import.meta.url);
  const before = existsSync(beforeFile) ? JSON.parse(readFileSync(beforeFile, 'utf8')) : undefined;
  const earlier = (store) => (before?.mode === work.mode ? before.stores.find((r) => r.store === store) : undefined);
  const rows = work.stores.map((result) => {
    const then = earlier(result.store);
    return `| ${label[result.store]} | ${f0(result.module)} | ${then ? f0(then.module) : '—'} | ${floor[result.store]}: ${f0(result.floor)} | ${show(workRatio(result))} | ${then ? show(workRatio(then)) : '—'} |`;
  });
  return `## The module's own work, without I/O (\`bench/module-cpu.ts\`)

\`IdempotencyInterceptor\` called in one process the way Nest's router calls an interceptor (an \`ExecutionContext\`
over Express-shaped request and response objects; the handler answers at once; the demo's metrics registered), a new
key per call, 20 at a time, against its floor on the same calls, ${ROUNDS} rounds alternated after a warm-up: the
in-memory store against \`/bench/floor-memory\`'s interceptor; the DynamoDB repository against
\`/bench/floor-intercepted\` (a pass-through interceptor around the floor's two DocumentClient calls), both on one
DynamoDB client whose HTTP handler answers \`{}\` at once. No network, no HTTP server, nothing else on the machine's
cores: ${how}.

| store | the module, ${unit} | before | its floor | module ÷ floor: medians [rounds] | before |
|---|---:|---:|---:|---:|---:|
${rows.join('\n')}

"Before" is the same harness on the library as it was at \`${before?.commit ?? '—'}\` (the code of
[before/RESULTS.md](before/RESULTS.md)), measured alike (\`bench/before/module-work.json\`).

On DynamoDB the SDK's own work (signing, serializing, its middleware) is most of a call, and the module's low-level
requests skip the DocumentClient's marshalling that the floor pays, so its own work above the calls is about what it
saves there. The in-memory store has no SDK to hide behind: the ratio is the module's whole protocol (key validation,
canonical fingerprint, lease, outcome capture, telemetry) over a \`Map\` and two hashes.`;
}
