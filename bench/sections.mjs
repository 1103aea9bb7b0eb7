// Sections of bench/RESULTS.md beyond the throughput runs: the goals, the latency of first requests, and the capacity
// units per request (bench/capacity.ts, on DynamoDB Local). Used by bench.mjs.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { workRatio } from './module-work.mjs';
import { f0, f2, median, perRound, show, spreadOf } from './stats.mjs';

const OURS = '/bench/idempotent';

/** bench/capacity.ts's figures, or why they could not be measured (DynamoDB Local needs Java 17+). */
export function measureCapacity() {
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (java.error) return { unavailable: 'no java on PATH (DynamoDB Local needs Java 17+)' };
  const root = new URL('..', import.meta.url).pathname;
  const output = execFileSync(
    process.execPath,
    [`${root}test/support/run-ts.cjs`, `${root}bench/capacity.ts`, '--json'],
    {
      encoding: 'utf8',
      cwd: root,
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, AWS_EC2_METADATA_DISABLED: 'true' },
    },
  );
  console.log('capacity units measured on DynamoDB Local');
  return JSON.parse(output);
}

/** The goals of the performance issue, each with its measured median and range and whether it is met. */
export function goalsSection({ find, ratio, capacity, latency, moduleWork }) {
  const rows = [];
  const goal = (text, spread, target, meets) => {
    const verdict = meets(spread.median) ? 'met' : '**not met**';
    const decided = meets(spread.min) === meets(spread.max);
    rows.push(
      `| ${text} | ${show(spread)} | ${target} | ${decided ? verdict : `${verdict} (median; the range crosses the target)`} |`,
    );
  };
  for (const scenario of ['new key every request', 'replays, cache off']) {
    goal(
      `${scenario}: CPU per request ÷ \`/bench/floor-intercepted\``,
      ratio(find(scenario), '/bench/floor-intercepted', 'cpuMicrosPerRequest'),
      '≤ 1.05',
      (x) => x <= 1.05,
    );
  }
  const newKey = find('new key every request');
  goal(
    'new key: `/bench/execute` CPU per request ÷ `/bench/powertools`',
    ratio(newKey, '/bench/powertools', 'cpuMicrosPerRequest', '/bench/execute'),
    '≤ 1.00',
    (x) => x <= 1,
  );
  goal(
    'new key: throughput ÷ `/bench/powertools`',
    ratio(newKey, '/bench/powertools', 'rps'),
    '≥ 0.95',
    (x) => x >= 0.95,
  );
  goal(
    'replays, cache on: CPU per request ÷ `/bench/powertools`',
    ratio(find('replays, cache on'), '/bench/powertools', 'cpuMicrosPerRequest'),
    '≤ 1.00',
    (x) => x <= 1,
  );
  const tracking = find('in-memory store, new key: call tracking');
  if (tracking) {
    goal(
      'call tracking (what steps and `commitWith` need) on a route that uses neither: CPU per request, on ÷ off',
      ratio(tracking, OURS, 'cpuMicrosPerRequest', '/bench/idempotent, tracking on'),
      '≤ 1.02',
      (x) => x <= 1.02,
    );
  }
  const dynamo = moduleWork?.stores.find((result) => result.store === 'dynamodb');
  if (dynamo) {
    goal(
      `new key, in one process without I/O (\`bench/module-cpu.ts\`, ${moduleWork.mode === 'callgrind' ? 'instructions' : 'CPU time'}) ÷ \`/bench/floor-intercepted\`'s calls`,
      workRatio(dynamo),
      '≤ 1.05',
      (x) => x <= 1.05,
    );
  }
  goal(
    'in-memory store, new key: CPU per request ÷ `/bench/intercepted`',
    ratio(find('in-memory store, new key'), '/bench/intercepted', 'cpuMicrosPerRequest'),
    '≤ 1.15',
    (x) => x <= 1.15,
  );
  goal(
    'replays, cache on: throughput ÷ `/bench/intercepted`',
    ratio(find('replays, cache on'), '/bench/intercepted', 'rps'),
    '≥ 1.00',
    (x) => x >= 1,
  );
  if (latency) {
    goal(
      'first requests, p50 latency: optimistic ÷ lease mode',
      perRound(latency, '/bench/optimistic', OURS, 'p50'),
      '≤ 0.60',
      (x) => x <= 0.6,
    );
  }
  if (capacity?.measured) {
    // The table's units (the work Powertools does too); the index of keys in flight's are shown on a row of their own.
    const units = (mode, kb, which, withIndex = false) => {
      const entry = capacity.measured.find((m) => m.mode === mode && m.kb === kb)[which];
      return entry.write + entry.read + (withIndex ? (entry.index ?? 0) : 0);
    };
    const sizes = [...new Set(capacity.measured.map((m) => m.kb))];
    const worstOf = (mode, withIndex) =>
      Math.max(
        ...sizes.flatMap((kb) =>
          ['first', 'replay'].map((w) => units(mode, kb, w, withIndex) / units('powertools', kb, w)),
        ),
      );
    for (const mode of ['lease', 'optimistic']) {
      const worst = worstOf(mode, false);
      rows.push(
        `| capacity units, ${mode} mode ÷ Powertools, worst of every size, first request and replay | ${f2(worst)} | ≤ 1.00 | ${worst <= 1 ? 'met' : '**not met**'} |`,
      );
      const at20 = units(mode, 20, 'first') / units('powertools', 20, 'first');
      rows.push(
        `| capacity units of a first request at 20 KB, ${mode} mode ÷ Powertools | ${f2(at20)} | ≤ 0.50 | ${at20 <= 0.5 ? 'met' : '**not met**'} |`,
      );
    }
    const withIndex = worstOf('lease', true);
    rows.push(
      `| the same, lease mode with the index of keys in flight's writes (Powertools has no sweep to pay for) | ${f2(withIndex)} | — | the price of a sweep that reads only the keys in flight |`,
    );
  }
  return `## Goals

Ratios are per round (the same slices of time), **median [min–max]**. The verdict is the median's; "(median; the range crosses
the target)" when some rounds say otherwise, i.e. the rounds are too noisy to settle it. Capacity units are counts, not
timings (one measurement each).

| goal | measured | target | |
|---|---:|---:|---|
${rows.join('\n')}
${cpuBudgetNote(find)}${inMemoryFloorNote(find('in-memory store, new key'))}`;
}

/**
 * The DynamoDB CPU goals in µs per request: what the module costs above `/bench/floor-intercepted` (per round, the
 * difference), what 5 % of the floor allows, and so how much of the module's own work would have to go.
 */
function cpuBudgetNote(find) {
  const FLOOR = '/bench/floor-intercepted';
  const lines = ['new key every request', 'replays, cache off'].flatMap((scenario) => {
    const result = find(scenario);
    if (!result?.runs[FLOOR]) return [];
    const cpu = (route) => result.runs[route].map((run) => run.cpuMicrosPerRequest);
    const floor = cpu(FLOOR);
    const above = spreadOf(cpu(OURS).map((micros, i) => micros - floor[i]));
    const allowed = 0.05 * median(floor);
    return [
      `| ${scenario} | ${f0(median(floor))} | ${f0(above.median)} [${f0(above.min)}–${f0(above.max)}] | ${f0(allowed)} | ${f0(Math.max(0, above.median - allowed))} |`,
    ];
  });
  if (lines.length === 0) return '';
  return `
The DynamoDB CPU goals in µs per request (medians over the rounds; "above" is the module's CPU minus the floor's, per
round): what meeting the target would take is the last column, out of the module's own work listed by function in
[PROFILE.md](PROFILE.md).

| scenario | \`/bench/floor-intercepted\` | the module, above it | 5 % of the floor | to shed |
|---|---:|---:|---:|---:|
${lines.join('\n')}
`;
}

/** The in-memory goal against what its calls cost by hand (`/bench/floor-memory`), when the run has that route. */
function inMemoryFloorNote(result) {
  if (!result?.runs['/bench/floor-memory']) return '';
  const cpu = (ours, other) => show(perRound(result, ours, other, 'cpuMicrosPerRequest'));
  return `
The in-memory goal measured against its floor (CPU per request, in-memory store, new key): \`/bench/floor-memory\`, the
bare minimum by hand inside an interceptor, costs ${cpu('/bench/floor-memory', '/bench/intercepted')} × \`/bench/intercepted\`;
the module costs ${cpu(OURS, '/bench/floor-memory')} × the floor. Everything the module does beyond the floor (its lease,
telemetry, key validation, canonical fingerprint, headers and error paths) has to fit in what the 1.15 target leaves
above the floor's own ratio.`;
}

/** p50 and p99 of first requests per route, with every DynamoDB call delayed. */
export function latencySection(result, { LATENCY_MS, LATENCY_CONNECTIONS, store }) {
  if (!result) return '';
  const rows = Object.entries(result.runs).map(([route, runs]) => {
    const p50 = spreadOf(runs.map((run) => run.p50));
    const p99 = spreadOf(runs.map((run) => run.p99));
    const calls = median(runs.map((run) => run.callsPerRequest));
    return `| \`${route}\` | ${f0(p50.median)} [${f0(p50.min)}–${f0(p50.max)}] | ${f0(p99.median)} [${f0(p99.min)}–${f0(p99.max)}] | ${f2(calls)} |`;
  });
  return `## Latency of a first request (every DynamoDB call ${LATENCY_MS} ms)

A proxy in front of ${store} holds every DynamoDB call ${LATENCY_MS} ms (\`BENCH_LATENCY_MS\`), about a same-Region round
trip; ${LATENCY_CONNECTIONS} connections (\`BENCH_LATENCY_CONNECTIONS\`), a new key per request, routes interleaved as
above. \`/bench/optimistic\` is \`@Idempotent({ mode: 'optimistic' })\` ([docs/optimistic-mode.md](../docs/optimistic-mode.md)):
one conditional \`PutItem\` after the handler instead of a claim before it and a completion after.

| route | p50 ms, median [min–max] over rounds | p99 ms | DynamoDB calls / request |
|---|---:|---:|---:|
${rows.join('\n')}

Optimistic ÷ lease p50, per round: **${show(perRound(result, '/bench/optimistic', OURS, 'p50'))}**.`;
}

/** First requests with 0, 1 and 3 recovery points against Powertools, every DynamoDB call held LATENCY_MS. */
export function stepsLatencySection(result, { LATENCY_MS }) {
  if (!result) return '';
  const label = { [OURS]: '0 steps (`/bench/idempotent`)', '/bench/steps1': '1 step', '/bench/steps3': '3 steps' };
  const rows = Object.entries(result.runs).map(([route, runs]) => {
    const p50 = spreadOf(runs.map((run) => run.p50));
    const p99 = spreadOf(runs.map((run) => run.p99));
    const calls = median(runs.map((run) => run.callsPerRequest));
    const ratios =
      route === '/bench/powertools'
        ? '| |'
        : `| ${show(perRound(result, route, '/bench/powertools', 'p50'))} | ${show(perRound(result, route, '/bench/powertools', 'p99'))} |`;
    return `| ${label[route] ?? `\`${route}\``} | ${f0(p50.median)} [${f0(p50.min)}–${f0(p50.max)}] | ${f0(p99.median)} [${f0(p99.min)}–${f0(p99.max)}] | ${f2(calls)} ${ratios}`;
  });
  return `## Latency of a first request with recovery points (every DynamoDB call ${LATENCY_MS} ms)

As above, in an app whose \`/bench/steps1\` and \`/bench/steps3\` routes record 1 and 3 steps (\`BENCH_STEPS=1\`; they
inject \`IdempotencyContext\`, which turns call tracking on for that app). A first request with n steps sends n + 2
DynamoDB calls: the claim, one write per step, the completion; Powertools sends 2 and records no steps.

| route | p50 ms, median [min–max] | p99 ms | DynamoDB calls / request | p50 ÷ Powertools, per round | p99 ÷ Powertools |
|---|---:|---:|---:|---:|---:|
${rows.join('\n')}`;
}

/** The index's write units on a lease-mode first request: the same at every response size, or their range. */
function indexCost(capacity) {
  const units = capacity.measured.filter((m) => m.mode === 'lease').map((m) => m.first.index ?? 0);
  const [low, high] = [Math.min(...units), Math.max(...units)];
  return low === high ? `${low} write units` : `${low} to ${high} write units`;
}

/** Capacity units per first request and per uncached replay, by response size and mode. */
export function capacitySection(capacity) {
  if (!capacity) return '';
  if (capacity.unavailable) return `## Capacity units\n\nNot measured on this machine: ${capacity.unavailable}.`;
  const cell = ({ write, read, computed, index }) =>
    `${write} W${read ? ` + ${read} R` : ''}${computed ? ` (${computed} computed)` : ''}${index ? ` + ${index} W index` : ''}`;
  const rows = capacity.measured.map(
    ({ mode, kb, first, replay }) => `| ${kb} KB | ${mode} | ${cell(first)} | ${cell(replay)} |`,
  );
  const thresholds = capacity.thresholds.map(
    ({ kb, plain, gzipped }) => `| ${kb} KB | ${plain} | ${gzipped} | ${f2(plain / gzipped)} |`,
  );
  return `## Capacity units (\`bench/capacity.ts\`, on DynamoDB Local)

Write (W) and read (R) capacity units of one first request and of one uncached replay (a second call with the same
key, the replay cache off), for a JSON response of each size (a list of order lines: as compressible as typical API
JSON; random bytes would not compress). The module through \`IdempotencyService.execute\` (the same DynamoDB calls as a
route), Powertools' \`makeIdempotent\` with its \`DynamoDBPersistenceLayer\`, each on its own table. Units are DynamoDB
Local's \`ConsumedCapacity\` (\`ReturnConsumedCapacity: INDEXES\`: the table's, and apart from them the write units of
the index of keys in flight, "W index") for every call that succeeds. A refused conditional
write is billed too, but its error carries no \`ConsumedCapacity\`: those units are **computed** from DynamoDB's rules
(1 write unit per KB of the larger of the item before and after, the item's size being its attribute names and
values) and marked. DynamoDB Local bills Powertools' completing \`UpdateItem\` at fewer units than that rule gives for
the item it writes (its response is stored as escaped JSON text, about 1.5 × the response), so Powertools' first
requests are if anything under-counted here.

| response | mode | first request | uncached replay |
|---|---|---:|---:|
${rows.join('\n')}

**The index of keys in flight** (docs/scaling.md) costs a lease-mode first request ${indexCost(capacity)}: one write
when the claim adds the record to it, one when the completion takes it out, whatever the response's size (the index
holds a few small attributes, not the response). A lease renewal (a long handler's heartbeat) moves the record's lease
end, the index's sort key: ${capacity.renewal ? `${capacity.renewal.write} W + ${capacity.renewal.index} W index` : 'not measured'}
(a delete and a put in the index). Optimistic mode writes no PENDING record and nothing to the index; a replay refused
by the claim's condition writes nothing to it. Powertools' table has no index: it has no sweep either, so a record
left PENDING by a crash waits for its expiry, found by no one.

What a replay costs follows from the refused claim (or put): DynamoDB bills it on the stored item's size, so a smaller
stored item makes every uncached replay cheaper too. Responses are gzipped above 0.7 KB of JSON
(\`COMPRESS_RESPONSE_ABOVE_BYTES\`), chosen from these sizes: below it the item (with its other attributes, about
0.25 KB) fits one write unit either way; above it, gzip (3–6 × on this JSON) keeps it to one unit up to about 3 KB.

| response | JSON bytes | gzipped bytes | ratio |
|---|---:|---:|---:|
${thresholds.join('\n')}`;
}

/**
 * The table of a bench run apart (its own command writes the file; this run does not measure it), copied as it stands
 * under `intro`, or a line saying it was not measured.
 */
function copiedSection(file, command, intro) {
  let text;
  try {
    text = readFileSync(new URL(`./${file}`, import.meta.url), 'utf8');
  } catch {
    return `Not measured: run \`${command}\` (it writes [${file}](${file})).`;
  }
  const generated = /^Generated by .*? on (\d{4}-\d{2}-\d{2})/m.exec(text)?.[1] ?? 'an earlier date';
  const table = text.split('\n').filter((line) => line.startsWith('|'));
  return [`From [${file}](${file}) (\`${command}\`, ${generated}, ${intro}`, '', ...table].join('\n');
}

/** What steps cost, from STEPS.md (`npm run bench:steps`). */
export function stepsSection() {
  return copiedSection(
    'STEPS.md',
    'npm run bench:steps',
    [
      'on DynamoDB Local, which reports the capacity each',
      'call consumed): the DynamoDB calls and capacity units of `IdempotencyService.execute` with steps, against the same',
      'request without them, Powertools and a hand-written floor. What they mean, and why the per-step goal is missed once',
      'the record passes 1 KB, is there.',
    ].join('\n'),
  );
}

/** What a sweep reads as the table grows, from SWEEP.md (`npm run bench:sweep`). */
export function sweepSection() {
  return copiedSection(
    'SWEEP.md',
    'npm run bench:sweep',
    [
      'on DynamoDB Local): a sweep of a table of finished',
      'records plus 100 stuck PENDING ones, with the index of keys in flight and without it. With it, what a sweep reads',
      'stays the same as the table grows; without it, it grows with the table. How it was measured is there.',
    ].join('\n'),
  );
}
