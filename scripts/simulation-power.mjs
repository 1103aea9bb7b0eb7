#!/usr/bin/env node
// The simulation's power (`npm run test:simulation-power`, not in CI): applies each protocol mutation of the catalogue
// below to the library's sources, one at a time, runs the simulation specs alone (test/simulation, at the budget
// `npm test` gives them) under several seeds, and reports for each mutant whether the simulation found it and after
// how many sequences. The sources are restored after each mutant (and on Ctrl-C). Run it in a checkout you are not
// editing: it rewrites files in place.
//   SEEDS=20 npm run test:simulation-power           (default 3 seeds: 1, 2, 3)
//   ONLY=hook-rejection npm run test:simulation-power
//   FAMILY=1 SEEDS=20 npm run test:simulation-power  (the fencing family, scripts/fencing-family.mjs: each mutant in one
//                                                     run of the protocol simulation's power mode, all seeds inside it)
//   node scripts/simulation-power.mjs --dry          (every mutant still applies and parses; writes nothing; in lint)
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSync } from '@swc/core';
import { fencingFamily } from './fencing-family.mjs';

const root = join(import.meta.dirname, '..');
const src = (file) => join(root, 'libs/idempotency/src', file);

/** Each mutant: what it breaks, and the edits that make it (each `from` must occur exactly once). */
const CATALOGUE = [
  {
    id: 'hook-rejection',
    what: '§1 an async onOutcome hook whose promise rejects is left unhandled',
    edits: [['observability/outcome-events.ts', 'if (isThenable(returned)) returned.then(undefined, failed);', '']],
  },
  {
    id: 'item-size',
    what: '§1 step sizes count the result only, and a completion DynamoDB refuses as too large is not retried',
    edits: [
      [
        'response/step-value.ts',
        'return Buffer.byteLength(stepKey(name)) + STEP_ENTRY_OVERHEAD_BYTES + encodedByteLength(stepValue(result));',
        'return encodedByteLength(stepValue(result)) + 0 * STEP_ENTRY_OVERHEAD_BYTES * stepKey(name).length;',
      ],
      [
        'dynamodb/item-mapping.ts',
        'if (!isItemTooLarge(error)) throw error;',
        'if (!isItemTooLarge(error) || true) throw error;',
      ],
    ],
  },
  {
    id: 'fingerprint-values',
    what: '§1 a fingerprint value JSON cannot tell apart (Set, Map, NaN) is hashed instead of refused',
    edits: [['keys/fingerprint.ts', 'if (strict) refuseAmbiguous(value);', '']],
  },
  {
    id: 'proto-step-name',
    what: '§1 the steps map is read with assignments (a step named __proto__ vanishes)',
    edits: [
      ['dynamodb/step-mapping.ts', 'return Object.entries(steps)', 'return Object.entries(Object.assign({}, steps))'],
    ],
  },
  {
    id: 'lone-surrogate',
    what: '§1 a step name with a lone surrogate is accepted',
    edits: [
      ['protocol/step-runner.ts', 'if (LONE_SURROGATE.test(name)) {', 'if (LONE_SURROGATE.test(name) && false) {'],
    ],
  },
  {
    id: 'derived-key-fingerprint',
    what: '§1 derived and step keys leave out the fingerprint (a different request reuses downstream keys)',
    edits: [['keys/derived-key.ts', '${recordKey}\\0${fingerprint}\\0${name}', '${recordKey}\\0${name}']],
  },
  {
    id: 'unnamed-calls',
    what: '§1 a second unnamed client call in one step takes the step’s key again',
    edits: [['protocol/step-runner.ts', 'if (step.taken) {', 'if (step.taken && false) {']],
  },
  {
    id: 'step-after-end',
    what: '§1 a step started after its call ended runs its function',
    edits: [['protocol/step-journal.ts', "if (this.ended) throw callEnded(name, 'the step was not started');", '']],
  },
  {
    id: 'shared-confirmation',
    what: '§3 each duplicate reads the record before its 409 (no shared read)',
    edits: [['protocol/single-flight.ts', '    if (!flight.confirming) {', '    if (true) {']],
  },
  {
    id: 'claim-skew',
    what: 'a PENDING record is claimable once its lease passed, without the clock-skew margin',
    edits: [
      [
        'repository/idempotency.record.ts',
        "return record.expiresAt < nowSeconds - (record.status === 'PENDING' ? clockSkewSeconds : 0);",
        'return record.expiresAt < nowSeconds;',
      ],
    ],
  },
  {
    id: 'claim-lease',
    what: 'a PENDING record is claimable while its lease runs (off by one: at its last second)',
    edits: [
      [
        'repository/idempotency.record.ts',
        "return record.expiresAt < nowSeconds - (record.status === 'PENDING' ? clockSkewSeconds : 0);",
        "return record.expiresAt <= nowSeconds + 1 - (record.status === 'PENDING' ? clockSkewSeconds : 0);",
      ],
    ],
  },
  {
    id: 'complete-fencing',
    what: 'the in-memory store completes, fails or renews a record whatever its claim token',
    edits: [
      [
        'repository/in-memory-idempotency.repository.ts',
        "    const record = this.records.get(key);\n    if (record?.status !== 'PENDING' || record.claimToken !== claimToken) {\n      return refusal(claimToken, record && readRecord(record));\n    }\n    record.status = status;",
        "    const record = this.records.get(key);\n    if (record?.status !== 'PENDING') {\n      return refusal(claimToken, record && readRecord(record));\n    }\n    record.status = status;",
      ],
    ],
  },
  {
    id: 'remove-fencing',
    what: 'an operator’s removal takes a record whatever it became since it was read',
    edits: [
      [
        'repository/in-memory-idempotency.repository.ts',
        'if (!record || record.claimToken !== claimToken || record.status !== status) {',
        'if (!record) {',
      ],
    ],
  },
  {
    id: 'step-lease-skew',
    what: 'a step starts until the lease’s end, without the clock-skew margin',
    edits: [
      [
        'protocol/step-journal.ts',
        'return leaseLost || this.deps.clock.nowSeconds() >= leaseEndsAt - this.call.clockSkewSeconds;',
        'return leaseLost || this.deps.clock.nowSeconds() >= leaseEndsAt;',
      ],
    ],
  },
  {
    id: 'step-lease-lost-flag',
    what: 'a refused step result does not mark the lease lost',
    edits: [
      [
        'protocol/step-journal.ts',
        "this.lease.leaseLost = true;\n      throw this.lost('its result was not recorded",
        "throw this.lost('its result was not recorded",
      ],
    ],
  },
  {
    id: 'step-start-lease-lost-flag',
    what: 'a refused start of an at-most-once step does not mark the lease lost',
    edits: [
      [
        'protocol/step-journal.ts',
        "this.lease.leaseLost = true;\n      throw this.lost('its start was not recorded",
        "throw this.lost('its start was not recorded",
      ],
    ],
  },
  {
    id: 'cache-age',
    what: 'the replay cache trusts an entry past replayCache.maxAgeSeconds',
    edits: [
      [
        'protocol/replay-cache.ts',
        'if (this.clock.monotonicMs() >= held.trustedUntilMonotonicMs) return undefined;',
        '',
      ],
    ],
  },
  {
    id: 'cache-expiry',
    what: 'the replay cache answers past the record’s expiresAt',
    edits: [
      ['protocol/replay-cache.ts', 'if (this.clock.nowSeconds() > held.completion.expiresAt) return undefined;', ''],
    ],
  },
  {
    id: 'local-owner-lease',
    what: 'single-flight joins a local owner whose lease has passed',
    edits: [
      ['protocol/single-flight.ts', 'if (joined && joined.leaseEndsAt >= this.clock.nowSeconds())', 'if (joined)'],
    ],
  },
  {
    id: 'mismatch',
    what: 'a different request under a running or completed key is not refused as a mismatch',
    edits: [
      [
        'protocol/idempotency.service.ts',
        'if (existing.fingerprint !== call.fingerprint) throw new IdempotencyMismatchError();',
        '',
      ],
    ],
  },
  {
    id: 'confirm-release',
    what: 'a duplicate of a local owner is answered in flight without looking at the store (a release goes unseen)',
    edits: [
      [
        'protocol/single-flight.ts',
        "if (record?.status === 'PENDING' && record.claimToken === claimToken) return localOwner(call, flight, claimToken);",
        'return localOwner(call, flight, claimToken);',
      ],
    ],
  },
  {
    id: 'abandon-on-lease-lost',
    what: 'a run whose step found the lease lost stores its outcome anyway',
    edits: [
      [
        'protocol/key-owner.ts',
        "if ('error' in outcome && outcome.error instanceof IdempotencyLeaseLostError) {",
        'if (false) {',
      ],
    ],
  },
  {
    id: 'method-fingerprint',
    what: "§1 a provider method's calls are fingerprinted without their arguments (a different message replays)",
    edits: [['contexts/method.context.ts', 'deliveredArguments(call.context.getArgs())', 'null']],
  },
  {
    id: 'method-unprotected',
    what: "§1 a provider method is called as written, as if Nest's pipeline protected it",
    edits: [['decorators/idempotent-method.ts', 'if (throughPipeline) return', 'if (throughPipeline || true) return']],
  },
  {
    id: 'method-display-name',
    what: "§1 (issue 63) a provider method's operation is its class's display name, not its name",
    edits: [
      [
        'contexts/method.context.ts',
        '  operation({ route }: InterceptedCall): string {\n    return route.name!;',
        '  operation({ route, context }: InterceptedCall): string {\n    return `${context.getClass().name}.${context.getHandler().name}` || route.name!;',
      ],
    ],
  },
  {
    id: 'operation-names-unchecked',
    what: '§1 (issue 63) two protected operations of one name start',
    edits: [['startup/operation-names.ts', '[sharedName(operation, entries)]', '[]']],
  },
  {
    id: 'reentrant-unchecked',
    what: '§1 (issue 63) a call under a record key its own caller holds waits on itself',
    edits: [['protocol/idempotency.service.ts', '      refuseReentrant(call.recordKey);\n', '']],
  },
  {
    id: 'mcp-unstored-json',
    what: '§1 (issue 63) an MCP tool result that cannot be recorded as typed values is not kept as the JSON sent',
    edits: [['contexts/mcp.context.ts', '      if (json === undefined) throw error;', '      throw error;']],
  },
  {
    id: 'batch-concurrency-unchecked',
    what: '§1 (issue 63) processBatch takes a concurrency of NaN, 0 or a string',
    edits: [
      [
        'lambda/batch-processor.ts',
        '  if (concurrency !== undefined && !(Number.isInteger(concurrency) && concurrency >= 1)) {',
        '  if (false) {',
      ],
    ],
  },
  {
    id: 'batch-not-stored-is-failure',
    what: '§1 (issue 63) a batch record completed before whose result was not stored is reported again for ever',
    edits: [
      [
        'lambda/batch-processor.ts',
        'if (error instanceof IdempotencyResultNotStoredError || error instanceof IdempotencyRecordUnreadableError) {',
        'if (false) {',
      ],
    ],
  },
  {
    id: 'in-flight-kept-on-completion',
    what: '§11 (issue 64) a completion leaves its record in the index of keys in flight',
    edits: [
      [
        'dynamodb/record-requests.ts',
        "'SET #status = :completed, #response = :response, #expires = :expiresAt, #completed = :now REMOVE #inflight',",
        "'SET #status = :completed, #response = :response, #expires = :expiresAt, #completed = :now',",
      ],
    ],
  },
  {
    id: 'in-flight-kept-on-failure',
    what: '§11 (issue 64) a failure (or a sweep’s release) leaves its record in the index of keys in flight',
    edits: [
      [
        'dynamodb/record-requests.ts',
        "UpdateExpression: 'SET #status = :failed, #expires = :expiresAt REMOVE #inflight',",
        "UpdateExpression: 'SET #status = :failed, #expires = :expiresAt',",
      ],
    ],
  },
  {
    id: 'in-flight-kept-on-release-forgetting-run',
    what: '§11 (issue 64) a release of a run that recorded every step it started leaves its record in the index',
    edits: [
      [
        'dynamodb/record-requests.ts',
        "'SET #status = :failed, #expires = :expiresAt REMOVE #inflight ADD #runs :minusOne'",
        "'SET #status = :failed, #expires = :expiresAt ADD #runs :minusOne'",
      ],
    ],
  },
  {
    id: 'in-flight-one-shard',
    what: '§11 (issue 64) every claim writes the same shard of the index (one hot index partition)',
    edits: [
      ['dynamodb/claim-requests.ts', "':shard': layout.inFlightShard(key),", "':shard': layout.inFlightShardValue(0),"],
    ],
  },
  {
    id: 'batch-order',
    what: '§2 a batch goes on past a failed record: a FIFO group or a stream runs out of order',
    edits: [
      [
        'lambda/batch-processor.ts',
        'if (!(await this.runRecord(record))) return;',
        'if (!(await this.runRecord(record))) continue;',
      ],
    ],
  },
];

const seeds = Array.from({ length: Number(process.env.SEEDS ?? 3) }, (_, i) => i + 1);
const only = process.env.ONLY?.split(',');
const originals = new Map();
const restore = () => {
  for (const [file, text] of originals) writeFileSync(file, text);
  originals.clear();
};
process.on('SIGINT', () => {
  restore();
  process.exit(130);
});

/**
 * The sources as a mutant's edits leave them, by path (each `from` must occur exactly once, and the result must still
 * parse as TypeScript); nothing is written.
 */
function mutated(edits) {
  const texts = new Map();
  for (const [file, from, to] of edits) {
    const path = src(file);
    const current = texts.get(path) ?? readFileSync(path, 'utf8');
    const count = current.split(from).length - 1;
    if (count !== 1) throw new Error(`${file}: ${JSON.stringify(from)} occurs ${count} times`);
    texts.set(
      path,
      current.replace(from, () => to),
    );
  }
  for (const text of texts.values()) parseSync(text, { syntax: 'typescript', decorators: true, target: 'es2022' });
  return texts;
}

function apply(edits) {
  for (const [path, text] of mutated(edits)) {
    if (!originals.has(path)) originals.set(path, readFileSync(path, 'utf8'));
    writeFileSync(path, text);
  }
}

/** Runs the simulation specs under a seed: found (and after how many sequences), or not, and how long it took. */
function simulate(seed) {
  const started = Date.now();
  const run = spawnSync('npx', ['jest', 'test/simulation', '--silent'], {
    cwd: root,
    env: { ...process.env, SIMULATION_SEED: String(seed), FORCE_COLOR: '0' },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const output = `${run.stdout}${run.stderr}`;
  const after = [...output.matchAll(/Property failed after (\d+) tests/g)].map((match) => Number(match[1]));
  const failedTests = [...output.matchAll(/● (.+)$/gm)].map((match) => match[1]);
  return {
    found: run.status !== 0,
    after: after.length ? Math.min(...after) : undefined,
    failedTests,
    ms: Date.now() - started,
  };
}

/**
 * A fencing-family mutant under every seed in one run of the protocol simulation's power mode, on the store that reaches
 * it: for each seed, found or not, and after how many sequences (fast-check's count, without shrinking).
 */
function simulateFamily(mutant) {
  const out = join(mkdtempSync(join(tmpdir(), 'power-')), 'results.json');
  const started = Date.now();
  spawnSync('npx', ['jest', 'test/simulation/protocol-simulation', '--silent'], {
    cwd: root,
    env: {
      ...process.env,
      SIMULATION_POWER_OUT: out,
      SIMULATION_POWER_SEEDS: `1-${seeds.length}`,
      SIMULATION_POWER_STORES: mutant.store,
      FORCE_COLOR: '0',
    },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  try {
    return { results: JSON.parse(readFileSync(out, 'utf8')), ms: Date.now() - started };
  } catch {
    return {
      results: seeds.map((seed) => ({ seed, found: false, what: 'the run did not finish' })),
      ms: Date.now() - started,
    };
  }
}

const family = fencingFamily();
if (process.env.DRY || process.argv.includes('--dry')) {
  // Only checks that every mutant still applies to the sources as they are (npm run lint runs this); writes nothing.
  const stale = [...CATALOGUE, ...family].filter((mutant) => {
    try {
      mutated(mutant.edits);
      return false;
    } catch (error) {
      console.log(`STALE ${mutant.id}: ${error.message.split('\n')[0]}`);
      return true;
    }
  });
  const ids = new Set([...CATALOGUE, ...family].map(({ id }) => id));
  console.log(`${ids.size - stale.length} of ${ids.size} mutants apply`);
  process.exit(stale.length > 0 || ids.size !== CATALOGUE.length + family.length ? 1 : 0);
}
if (process.env.FAMILY) {
  console.log(
    '| mutant | what it breaks | store | found under | sequences to find it (per seed) | the first violation |',
  );
  console.log('|---|---|---|---:|---|---|');
  for (const mutant of family.filter(({ id }) => !only || only.includes(id))) {
    try {
      apply(mutant.edits);
      const { results, ms } = simulateFamily(mutant);
      const found = results.filter((result) => result.found);
      const first = found[0]?.what?.split('violated: ')[1] ?? found[0]?.what ?? '—';
      console.log(
        `| ${mutant.id} | ${mutant.what} | ${mutant.store} | ${found.length} of ${results.length} | ${results
          .map((result) => (result.found ? result.after : '—'))
          .join(', ')} | ${first.replace(/\|/g, '/').slice(0, 160)} (${Math.round(ms / 1000)} s) |`,
      );
    } finally {
      restore();
    }
  }
  process.exit(0);
}
execFileSync('npx', ['jest', 'test/simulation', '--silent'], { cwd: root, stdio: 'ignore' }); // the unmutated run passes
console.log(`| mutant | what it breaks | found under | sequences to find it (per seed) | by |`);
console.log(`|---|---|---:|---|---|`);
for (const mutant of CATALOGUE.filter(({ id }) => !only || only.includes(id))) {
  try {
    apply(mutant.edits);
    const results = seeds.map(simulate);
    const found = results.filter((result) => result.found);
    const by = [...new Set(found.flatMap((result) => result.failedTests.map((name) => name.split(' › ').at(-1))))];
    console.log(
      `| ${mutant.id} | ${mutant.what} | ${found.length} of ${seeds.length} seeds | ${results
        .map((result) => (result.found ? (result.after ?? 'a fixed case') : '—'))
        .join(', ')} | ${by.slice(0, 2).join('; ') || '—'} |`,
    );
  } finally {
    restore();
  }
}
