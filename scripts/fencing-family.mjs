// The fencing family (issue 63 §3): every fenced write of each repository, and each conjunct of its fence removed for
// one transition at a time, generated from the fences' own text rather than written mutant by mutant. Each mutant is a
// list of edits ([file, from, to], `from` found exactly once) on libs/idempotency/src, with the store whose simulation
// reaches it (`memory`: the in-memory fleet, `dynalite`: the DynamoDB repository's condition expressions). Used by
// scripts/simulation-power.mjs (`FAMILY=1 npm run test:simulation-power`).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const SRC = join(import.meta.dirname, '../libs/idempotency/src');

/** The top-level parts of `text` split at `separator` outside parentheses and quotes. */
function topLevel(text, separator) {
  const parts = [];
  let depth = 0;
  let quote;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = undefined;
    } else if (c === "'" || c === '`') quote = c;
    else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (depth === 0 && text.startsWith(separator, i)) {
      parts.push(text.slice(start, i));
      start = i + separator.length;
      i += separator.length - 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((part) => part.trim());
}

/** Without one pair of parentheses around the whole, when they are the whole. */
function unwrap(text) {
  if (!text.startsWith('(') || !text.endsWith(')')) return text;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '(') depth++;
    if (text[i] === ')') depth--;
    if (depth === 0 && i < text.length - 1) return text;
  }
  return text.slice(1, -1);
}

/**
 * Every conjunct of a DynamoDB condition expression, at any depth (the operands of each AND, and the alternatives of
 * each OR that are themselves AND groups), each as the condition with that conjunct made always true. The conjunct is
 * replaced by `(c OR NOT (c))`, which keeps its placeholders in use (DynamoDB refuses unused ones). And the skew margin:
 * `:leaseCutoff` (now less clockSkewSeconds) read as `:now`, with the cutoff kept in use.
 */
export function conditionConjuncts(condition) {
  const mutants = [];
  const walk = (text, rebuild) => {
    const body = unwrap(text);
    const wrap = (inner) => rebuild(body === text ? inner : `(${inner})`);
    for (const separator of [' OR ', ' AND ']) {
      const parts = topLevel(body, separator);
      if (parts.length < 2) continue;
      parts.forEach((part, i) => {
        const with_ = (replacement) => wrap(parts.map((each, j) => (j === i ? replacement : each)).join(separator));
        // An AND's operand is a conjunct; so is an OR's alternative that is the lease's end alone (its only condition).
        const leaseAlone = separator === ' OR ' && /^#expires < :\w+$/.test(part);
        if (separator === ' AND ' || leaseAlone) {
          // DynamoDB refuses redundant parentheses: a part already in its own is negated as it is.
          const negated = unwrap(part) === part ? `NOT (${part})` : `NOT ${part}`;
          mutants.push({ conjunct: part, condition: with_(`(${part} OR ${negated})`) });
        }
        walk(part, with_);
      });
      return;
    }
  };
  walk(condition, (whole) => whole);
  if (condition.includes(':leaseCutoff')) {
    mutants.push({
      conjunct: 'the skew margin (:leaseCutoff read as :now)',
      condition: condition.replace(/#expires < :leaseCutoff/g, '(#expires < :now AND :leaseCutoff = :leaseCutoff)'),
    });
  }
  return mutants;
}

/** The conjuncts of an AND written in JavaScript (`a && b`), each as the expression with that conjunct true. */
function jsConjuncts(expression) {
  const parts = topLevel(expression, ' && ');
  return parts.map((part, i) => ({
    conjunct: part,
    expression: parts.map((each, j) => (j === i ? 'true' : each)).join(' && '),
  }));
}

/** The reasons of a refusal written in JavaScript (`a || b`), each dropped (`drop[i]`: what stands in for it). */
function refusalReasons(expression, drop) {
  const parts = topLevel(expression, ' || ');
  return parts.map((part, i) => ({ conjunct: part, replacement: drop[i], parts, i }));
}

const RECORD_REQUESTS = 'dynamodb/record-requests.ts';
const CLAIM_REQUESTS = 'dynamodb/claim-requests.ts';
const OPERATOR_REQUESTS = 'dynamodb/operator-requests.ts';
const MEMORY = 'repository/in-memory-idempotency.repository.ts';
const MEMORY_RECORDS = 'repository/in-memory-records.ts';
const RECORD = 'repository/idempotency.record.ts';

/**
 * A condition the sources name: `const NAME = '…';` (or a template of other constants, `known`) in `file`, read from
 * the file itself, so that the family mutates the fence as it is written today. `definition` is its text as written
 * (what an edit replaces), `value` the condition, and `as(condition)` the definition with another condition.
 */
function constant(file, name, known = {}) {
  const text = readFileSync(join(SRC, file), 'utf8');
  const match = text.match(new RegExp(`((?:export )?const ${name} =)\\s*([\`'])([^\`']*)\\2;`));
  if (!match) throw new Error(`${file}: no string constant ${name} (the family reads the fences from the sources)`);
  const value = match[3].replace(/\$\{(\w+)\}/g, (_, other) => {
    if (!(other in known)) throw new Error(`${file}: ${name} uses \${${other}}, which the family was not given`);
    return known[other];
  });
  return { definition: match[0], value, as: (condition) => `${match[1]} '${condition}';` };
}

/** The mutants, generated. */
export function fencingFamily() {
  const mutants = [];
  const add = (id, what, store, edits) => mutants.push({ id, what, store, edits, family: true });
  const OWNED_BY_CLAIM = constant(RECORD_REQUESTS, 'OWNED_BY_CLAIM').value;
  const CLAIMABLE = constant(RECORD_REQUESTS, 'CLAIMABLE').value;
  const tag = (conjunct) => conjunct.split(' ')[0].slice(1);

  // DynamoDB: the owner's transitions share OWNED_BY_CLAIM through `guarded`; each transition is told by its update.
  const transitions = { complete: ':response', fail: ':failed', renew: '#renewed' };
  for (const { conjunct, condition } of conditionConjuncts(OWNED_BY_CLAIM)) {
    for (const [transition, mark] of Object.entries(transitions)) {
      add(
        `ddb-${transition}-without-${tag(conjunct)}`,
        `DynamoDB: a ${transition} without \`${conjunct}\``,
        'dynalite',
        [
          [
            RECORD_REQUESTS,
            '  const condition = leaseEndedBefore === undefined ? OWNED_BY_CLAIM : STUCK_LEASE;',
            `  const condition = leaseEndedBefore === undefined ? (transition.UpdateExpression.includes('${mark}') ? '${condition}' : OWNED_BY_CLAIM) : STUCK_LEASE;`,
          ],
        ],
      );
    }
    // Steps share `stepUpdate`: a step's result, and an at-most-once step's start (its entry marked `started`).
    for (const [kind, started] of [
      ['step', false],
      ['start-step', true],
    ]) {
      const mutated = started ? `'${condition}' : OWNED_BY_CLAIM` : `OWNED_BY_CLAIM : '${condition}'`;
      add(
        `ddb-${kind}-without-${tag(conjunct)}`,
        `DynamoDB: ${started ? 'an at-most-once step’s start' : 'a step’s result'} without \`${conjunct}\``,
        'dynalite',
        [
          [
            CLAIM_REQUESTS,
            '    ConditionExpression: OWNED_BY_CLAIM,\n',
            `    ConditionExpression: entry.entries.started ? ${mutated},\n`,
          ],
        ],
      );
    }
  }
  // DynamoDB: the reconciler's release of a stuck lease (read from an eventually consistent index or scan).
  const stuck = constant(RECORD_REQUESTS, 'STUCK_LEASE', { OWNED_BY_CLAIM });
  conditionConjuncts(stuck.value).forEach(({ conjunct, condition }, i) =>
    add(`ddb-release-${i + 1}`, `DynamoDB: a sweep's release of a stuck lease without \`${conjunct}\``, 'dynalite', [
      [RECORD_REQUESTS, stuck.definition, stuck.as(condition)],
    ]),
  );
  // DynamoDB: the claim's resume form, and its versioned condition (`onVersionChange` 'refuse' or 'restart').
  const resumable = constant(CLAIM_REQUESTS, 'RESUMABLE');
  conditionConjuncts(resumable.value).forEach(({ conjunct, condition }, i) =>
    add(`ddb-resume-${i + 1}`, `DynamoDB: a resuming claim without \`${conjunct}\``, 'dynalite', [
      [CLAIM_REQUESTS, resumable.definition, resumable.as(condition)],
    ]),
  );
  const sameVersion = constant(CLAIM_REQUESTS, 'RESUMABLE_SAME_VERSION', { RESUMABLE: resumable.value });
  conditionConjuncts(sameVersion.value)
    .filter(({ conjunct }) => !resumable.value.includes(conjunct) && !conjunct.includes('skew')) // RESUMABLE's are above
    .forEach(({ conjunct, condition }, i) =>
      add(`ddb-resume-version-${i + 1}`, `DynamoDB: a versioned resuming claim without \`${conjunct}\``, 'dynalite', [
        [CLAIM_REQUESTS, sameVersion.definition, sameVersion.as(condition)],
      ]),
    );
  // DynamoDB: the claim's restart form (CLAIMABLE, the token and status read) and optimistic mode's put (CLAIMABLE).
  const restartable = constant(CLAIM_REQUESTS, 'RESTARTABLE', { CLAIMABLE });
  conditionConjuncts(restartable.value).forEach(({ conjunct, condition }, i) =>
    add(`ddb-restart-${i + 1}`, `DynamoDB: a restarting claim without \`${conjunct}\``, 'dynalite', [
      [CLAIM_REQUESTS, restartable.definition, restartable.as(condition)],
    ]),
  );
  conditionConjuncts(CLAIMABLE).forEach(({ conjunct, condition }, i) =>
    add(`ddb-put-completed-${i + 1}`, `DynamoDB: optimistic mode's put without \`${conjunct}\``, 'dynalite', [
      [RECORD_REQUESTS, '    ConditionExpression: CLAIMABLE,\n', `    ConditionExpression: '${condition}',\n`],
    ]),
  );
  // DynamoDB: an operator's writes: a removal, a poisoned record reopened, a revision of its steps (step surgery).
  const removed = "  const condition = '#status = :status AND #token = :token';";
  for (const { conjunct, condition } of conditionConjuncts('#status = :status AND #token = :token')) {
    add(`ddb-remove-without-${tag(conjunct)}`, `DynamoDB: a removal without \`${conjunct}\``, 'dynalite', [
      [OPERATOR_REQUESTS, removed, `  const condition = '${condition}';`],
    ]);
  }
  const reopen = '#status = :failed AND #token = :token AND attribute_exists(#response)';
  conditionConjuncts(reopen).forEach(({ conjunct, condition }, i) =>
    add(
      `ddb-reopen-${i + 1}`,
      `DynamoDB: an operator's reopening of a poisoned key without \`${conjunct}\``,
      'dynalite',
      [[OPERATOR_REQUESTS, `  const condition = '${reopen}';`, `  const condition = '${condition}';`]],
    ),
  );
  const revision = [
    "  let condition = '#status = :status AND #token = :token';",
    "  if (status === 'PENDING') condition += ' AND #expires < :leaseEndedBefore';",
  ];
  const unmutated = (pending) =>
    `#status = :status AND #token = :token${pending ? ' AND #expires < :leaseEndedBefore' : ''}`;
  conditionConjuncts(unmutated(true)).forEach(({ conjunct, condition }, i) => {
    const other = conditionConjuncts(unmutated(false)).find((each) => each.conjunct === conjunct)?.condition;
    add(`ddb-revise-steps-${i + 1}`, `DynamoDB: step surgery without \`${conjunct}\``, 'dynalite', [
      [
        OPERATOR_REQUESTS,
        revision.join('\n'),
        `  const condition = status === 'PENDING' ? '${condition}' : '${other ?? unmutated(false)}';`,
      ],
    ]);
  });

  // In memory: the owner's transitions share one guard; each transition is told by the status it writes.
  const transitionGuard = "record?.status !== 'PENDING' || record.claimToken !== claimToken";
  const transitionStatus = {
    complete: "status === 'COMPLETED'",
    fail: "status === 'FAILED'",
    renew: "status === 'PENDING'",
  };
  for (const { conjunct, replacement, parts, i } of refusalReasons(transitionGuard, ['!record', 'false'])) {
    for (const [transition, guard] of Object.entries(transitionStatus)) {
      const mutated = parts.map((each, j) => (j === i ? `(${guard} ? ${replacement} : ${each})` : each)).join(' || ');
      add(
        `memory-${transition}-without-${i === 0 ? 'status' : 'token'}`,
        `in memory: a ${transition} without \`${conjunct}\``,
        'memory',
        [
          [
            MEMORY,
            `    if (${transitionGuard}) {\n      return refusal(claimToken, record && readRecord(record));\n    }\n    record.status = status;`,
            `    if (${mutated}) {\n      return refusal(claimToken, record && readRecord(record));\n    }\n    record.status = status;`,
          ],
        ],
      );
    }
  }
  // In memory: steps share `setStep`: a step's result, and an at-most-once step's start (its entry has `startedAt`).
  for (const { conjunct, replacement, parts, i } of refusalReasons(transitionGuard, ['!record', 'false'])) {
    for (const [kind, started] of [
      ['step', false],
      ['start-step', true],
    ]) {
      const when = started ? "'startedAt' in entry" : "!('startedAt' in entry)";
      const mutated = parts.map((each, j) => (j === i ? `(${when} ? ${replacement} : ${each})` : each)).join(' || ');
      add(
        `memory-${kind}-without-${i === 0 ? 'status' : 'token'}`,
        `in memory: ${started ? 'an at-most-once step’s start' : 'a step’s result'} without \`${conjunct}\``,
        'memory',
        [
          [
            MEMORY,
            `    if (${transitionGuard}) {\n      return refusal(claimToken, record && readRecord(record));\n    }\n    (record.steps`,
            `    if (${mutated}) {\n      return refusal(claimToken, record && readRecord(record));\n    }\n    (record.steps`,
          ],
        ],
      );
    }
  }
  const removal = '!record || record.claimToken !== claimToken || record.status !== status';
  for (const { conjunct, replacement, parts, i } of refusalReasons(removal, ['!record', 'false', 'false']).slice(1)) {
    const mutated = parts.map((each, j) => (j === i ? replacement : each)).join(' || ');
    add(
      `memory-remove-without-${i === 1 ? 'token' : 'status'}`,
      `in memory: a removal without \`${conjunct}\``,
      'memory',
      [[MEMORY, `if (${removal}) {`, `if (${mutated}) {`]],
    );
  }
  // In memory: an operator's reopening of a poisoned key, and its revision of a request's steps (`revisable`).
  const reopened =
    "!record || record.claimToken !== claimToken || record.status !== 'FAILED' || record.response === undefined";
  const reopenDrops = ['!record', 'false', 'false', 'false'];
  for (const { conjunct, replacement, parts, i } of refusalReasons(reopened, reopenDrops).slice(1)) {
    const mutated = parts.map((each, j) => (j === i ? replacement : each)).join(' || ');
    add(`memory-reopen-${i}`, `in memory: an operator's reopening without \`${conjunct}\``, 'memory', [
      [MEMORY, `if (${reopened}) {`, `if (${mutated}) {`],
    ]);
  }
  const revisable = 'record.claimToken !== claimToken || record.status !== status';
  for (const { conjunct, replacement, parts, i } of refusalReasons(revisable, ['false', 'false'])) {
    const mutated = parts.map((each, j) => (j === i ? replacement : each)).join(' || ');
    add(`memory-revise-steps-${i + 1}`, `in memory: step surgery without \`${conjunct}\``, 'memory', [
      [MEMORY_RECORDS, `if (${revisable}) return false;`, `if (${mutated}) return false;`],
    ]);
  }
  add('memory-revise-steps-3', 'in memory: step surgery on a PENDING record whose lease has not ended', 'memory', [
    [
      MEMORY_RECORDS,
      "return status !== 'PENDING' || record.expiresAt < (leaseEndedBefore ?? Number.NEGATIVE_INFINITY);",
      'return true;',
    ],
  ]);
  // In memory: a claim resumes the steps only of the same request, left unfinished, and of its version.
  const resume = "existing?.status !== 'COMPLETED' && existing?.fingerprint === fingerprint";
  for (const { conjunct, expression } of jsConjuncts(resume)) {
    add(
      `memory-resume-without-${conjunct.includes('status') ? 'status' : 'fingerprint'}`,
      `in memory: a claim resumes steps without \`${conjunct}\``,
      'memory',
      [[MEMORY, `const same = ${resume};`, `const same = ${expression};`]],
    );
  }
  add(
    'memory-version-restart-resumes',
    'in memory: `onVersionChange: restart` resumes the other version’s steps',
    'memory',
    [
      [
        MEMORY,
        'const resumed = same && change === undefined ? existing : undefined;',
        'const resumed = same ? existing : undefined;',
      ],
    ],
  );
  add(
    'memory-version-refuse-ignored',
    'in memory: `onVersionChange: refuse` claims the other version’s record',
    'memory',
    [[MEMORY, "if (change === 'refuse') return { claimed: false, existing: read! };", '']],
  );
  // Both stores: which record holds steps of another version (the claim's decision, and the protocol's refusal).
  add('version-check', 'a record of another version is taken for the claim’s own', 'memory', [
    [RECORD, 'return held && record.version !== version;', 'return false;'],
  ]);
  // Both stores: a final failure (a poisoned key) is not claimable until it expires.
  add('memory-claimable-final-failure', 'in memory: a poisoned key is claimable before it expires', 'memory', [
    [
      RECORD,
      "if (record.status === 'FAILED' && record.response === undefined) return true;",
      "if (record.status === 'FAILED') return true;",
    ],
  ]);
  // In memory: optimistic mode's put, with the claim's skew margin.
  add('memory-put-completed-without-skew', 'in memory: optimistic mode’s put without the skew margin', 'memory', [
    [
      MEMORY,
      'if (existing && !isClaimable(existing, now, clockSkewSeconds)) {',
      'if (existing && !isClaimable(existing, now, 0)) {',
    ],
  ]);
  // Both stores: a released record that holds steps is its request's until it expires (the claim's decision; DynamoDB's
  // restart form then holds it to the record read).
  add('held-steps', 'a claim takes a released record that holds another request’s steps', 'memory', [
    ['repository/idempotency.record.ts', 'return !heldSteps || record.fingerprint === fingerprint;', 'return true;'],
  ]);
  // In memory: the reconciler's release of a stuck lease only if it ended.
  add(
    'memory-release-without-lease-end',
    'in memory: a sweep’s release of a lease renewed since it was read',
    'memory',
    [
      [
        MEMORY,
        'if (leaseEndedBefore !== undefined && running && !(running.expiresAt < leaseEndedBefore)) {',
        'if (false) {',
      ],
    ],
  );
  // The sweep: a lease past its end by the margin (read, and released), from a scan (the in-memory store) or the index
  // of keys in flight (the DynamoDB store); a finished record past its expiry by the margin.
  const RECONCILER = 'observability/idempotency.reconciler.ts';
  const stuckBefore = [RECONCILER, 'const stuckBefore = now - skew;', 'const stuckBefore = now;'];
  add('sweep-lease-skew', 'the reconciler releases a lease past its end without the skew margin (a scan)', 'memory', [
    stuckBefore,
  ]);
  add(
    'sweep-index-lease-skew',
    'the reconciler releases a lease past its end without the skew margin (the index of keys in flight)',
    'dynalite',
    [stuckBefore],
  );
  add(
    'sweep-expire-skew',
    'the reconciler deletes a finished record past its expiry without the skew margin',
    'memory',
    [
      [
        RECONCILER,
        "const finished = record.status !== 'PENDING' && record.expiresAt < now - skew;",
        "const finished = record.status !== 'PENDING' && record.expiresAt < now;",
      ],
    ],
  );
  return mutants;
}
