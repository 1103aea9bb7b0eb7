// The CPU profiles of `npm run bench`: a `node --cpu-prof` file read over the measured run's window (self time by
// function and by owner, and the share of the module's own work), PROFILE.md, and the before/after summary in
// RESULTS.md. Used by bench.mjs.
import { readFileSync } from 'node:fs';
import { f0 } from './stats.mjs';

/** Frames of Nest's handler pipeline: below one of them, the time is the handler's (and Nest's), not the module's. */
const NEST_PIPELINE = /@nestjs\/core\/(interceptors\/interceptors-consumer|router\/router-execution-context)/;

/**
 * A `.cpuprofile`'s samples inside `window` (monotonic µs): self time by frame (`top`) and by owner (`packages`), and
 * the module's own work: samples whose innermost library frame has no Nest handler frame below it (its code and what
 * it calls: hashing, timers, metrics, the AWS SDK), with the AWS SDK's part of it.
 */
export function readProfile(file, window) {
  const { nodes, samples, timeDeltas, startTime } = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const parentOf = new Map();
  for (const node of nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const frameOf = new Map(nodes.map((node) => [node.id, frameName(node.callFrame)]));
  const self = new Map();
  const work = { busy: 0, module: 0, sdk: 0 };
  /** The module's own work by its innermost library frame (what that frame calls outside the library included). */
  const own = new Map();
  let t = startTime;
  let total = 0;
  samples.forEach((id, i) => {
    t += timeDeltas[i];
    if (t < window[0] || t > window[1]) return;
    const frame = frameOf.get(id);
    const delta = timeDeltas[i + 1] ?? 0;
    self.set(frame, (self.get(frame) ?? 0) + delta);
    total += delta;
    if (byId.get(id).callFrame.functionName === '(idle)') return;
    work.busy += delta;
    const library = libraryFrameOf(id, frameOf, parentOf);
    if (!library) return;
    work.module += delta;
    own.set(library, (own.get(library) ?? 0) + delta);
    if (packageOf(frame).startsWith('AWS SDK')) work.sdk += delta;
  });
  const top = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 15);
  const packages = new Map();
  for (const [frame, micros] of self) packages.set(packageOf(frame), (packages.get(packageOf(frame)) ?? 0) + micros);
  const ownTop = [...own.entries()].sort((a, b) => b[1] - a[1]).slice(0, 20);
  return { total, top, packages: [...packages.entries()].sort((a, b) => b[1] - a[1]), work, own: ownTop };
}

/**
 * The innermost library frame of a sample's stack, walked from its leaf, when it comes before any frame of Nest's
 * handler pipeline (the sample is the module's own work); undefined otherwise.
 */
function libraryFrameOf(id, frameOf, parentOf) {
  for (let node = id; node !== undefined; node = parentOf.get(node)) {
    const frame = frameOf.get(node);
    if (frame.includes(' libs/')) return frame;
    if (NEST_PIPELINE.test(frame)) return undefined;
  }
  return undefined;
}

function frameName({ functionName, url, lineNumber }) {
  const where = url
    ? `${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(dist|libs)\//, '$1/')}:${lineNumber + 1}`
    : '';
  return `${functionName || '(anonymous)'} ${where}`.trim();
}

/** Who a frame belongs to: an npm package, this library, the demo, Node itself, or V8 (GC, idle, program). */
function packageOf(frame) {
  const location = frame.split(' ').pop();
  if (location.startsWith('libs/')) return 'nestjs-dynamodb-idempotency (this module)';
  if (location.startsWith('dist/')) return 'the demo app';
  if (location.startsWith('node:')) return 'Node.js (node:*)';
  const pkg = /^((?:@[^/]+\/)?[^/:]+)\//.exec(location)?.[1];
  if (pkg?.startsWith('@aws-sdk') || pkg?.startsWith('@smithy') || pkg?.startsWith('@aws-crypto'))
    return 'AWS SDK (@aws-sdk, @smithy)';
  if (pkg?.startsWith('@nestjs')) return 'NestJS';
  if (pkg?.startsWith('@aws-lambda-powertools')) return 'Powertools';
  return pkg ?? 'V8 / native (GC, idle, writev, …)';
}

export function profileReport(profiles, durationSeconds) {
  const sections = profiles.map(({ scenario, run, total, top, packages, work, own }) => {
    const share = (micros) => `${((micros / total) * 100).toFixed(1)} %`;
    const perRequest = (micros) => f0((micros / work.busy) * run.cpuMicrosPerRequest);
    const lines = top.map(([frame, micros]) => `| ${share(micros)} | \`${frame.replace(/\|/g, '\\|')}\` |`);
    const owners = packages.slice(0, 10).map(([owner, micros]) => `| ${share(micros)} | ${owner} |`);
    const ownLines = own.map(([frame, micros]) => `| ${perRequest(micros)} | \`${frame.replace(/\|/g, '\\|')}\` |`);
    return `### ${scenario}

${f0(run.rps)} req/s, ${f0(run.cpuMicrosPerRequest)} µs CPU per request while profiled (the profiler itself costs some).
The module's own work (a library frame innermost, no Nest handler frame below it): ${((work.module / work.busy) * 100).toFixed(1)} % of the
non-idle samples, about ${perRequest(work.module)} µs per request, of which the AWS SDK ${perRequest(work.sdk)} µs. Garbage collection
and Node's I/O are nobody's in this count.

| self time | by owner |
|---:|---|
${owners.join('\n')}

| self time | top functions (and locations) |
|---:|---|
${lines.join('\n')}

The module's own work by function: each sample of it counted to its innermost library frame, with what that frame
calls outside the library (the AWS SDK under the store calls, hashing, metrics), µs per request.

| µs / request | innermost library frame |
|---:|---|
${ownLines.join('\n')}`;
  });
  return `# Profile of the module's route

Generated by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}: the demo app under \`node --cpu-prof\`, one
scenario per app process, and only the samples taken during the measured ${durationSeconds} s run (not start-up or warm-up),
summed by function (self time, share of the run's samples).

${sections.join('\n\n')}
`;
}

/**
 * The profiles of bench/before/PROFILE.md and of this run side by side: CPU per request while profiled and the
 * largest owners of self time, per scenario. Both are read from PROFILE.md text, so any two runs can be compared.
 */
export function profileSummary(beforeText, afterText) {
  const parse = (text) =>
    Object.fromEntries(
      text
        .split('\n### ')
        .slice(1)
        .map((section) => {
          const [scenario] = section.split('\n');
          const cpu = /, (\d+) µs CPU per request/.exec(section)?.[1];
          const own = /about (\d+) µs per request, of which the AWS SDK (\d+) µs/.exec(section);
          const owners = [...section.matchAll(/^\| ([\d.]+ %) \| ([^`|][^|]*) \|$/gm)].map(
            ([, share, owner]) => `${owner.trim()} ${share}`,
          );
          return [scenario.trim(), { cpu, owners, own: own ? `${Number(own[1]) - Number(own[2])}` : '' }];
        }),
    );
  const before = parse(beforeText);
  const after = parse(afterText);
  const rows = Object.keys(after).flatMap((scenario) =>
    [
      ['before', before[scenario]],
      ['after', after[scenario]],
    ]
      .filter(([, profile]) => profile)
      .map(
        ([when, profile]) =>
          `| ${scenario} | ${when} | ${profile.cpu} | ${profile.own} | ${profile.owners.slice(0, 5).join('; ')} |`,
      ),
  );
  return `## Profile, before and after

The module's route under \`node --cpu-prof\` (details: [PROFILE.md](PROFILE.md), and [before/PROFILE.md](before/PROFILE.md)):
self time by owner, largest first. CPU per request is while profiled (the profiler costs some); the module's own work is
the samples whose innermost library frame is the module's, less the AWS SDK calls under them (as PROFILE.md counts it).

| scenario | run | CPU µs / request | the module's own work, µs / request | self time by owner |
|---|---|---:|---:|---|
${rows.join('\n')}

`;
}
