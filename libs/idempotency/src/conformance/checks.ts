import { Answer, describe, replayed, sameAnswer } from './http-target';
import type { Facts } from './scenarios';

/** A check's result: met, broken (with what was seen), or not checked (and why). */
export type Outcome =
  { status: 'pass'; detail?: string } | { status: 'fail'; detail: string } | { status: 'skip'; detail: string };

/** One checkable requirement: what it says, and how a scenario's facts show it met or broken. */
export interface Check {
  scenario: string;
  says: string;
  judge(facts: Facts): Outcome;
}

const pass = (detail?: string): Outcome => ({ status: 'pass', ...(detail ? { detail } : {}) });
const fail = (detail: string): Outcome => ({ status: 'fail', detail });
const skip = (detail: string): Outcome => ({ status: 'skip', detail });
const expect = (ok: boolean, detail: string): Outcome => (ok ? pass() : fail(detail));
const success = (answer: Answer) => answer.status >= 200 && answer.status < 300;

/** The key's request took effect exactly once (by `--effects-url`). */
const once = (scenario: string, what: string): Check => ({
  scenario,
  says: `${what} took effect exactly once`,
  judge: ({ effects }) =>
    effects === undefined
      ? skip('no --effects-url: ran once cannot be told from answered once')
      : expect(effects === 1, `it took effect ${effects} times`),
});

/** The second request got the first one's answer: status and body bytes. */
const secondGetsFirst = (scenario: string, says: string): Check => ({
  scenario,
  says,
  judge: ({ first, second }) =>
    expect(sameAnswer(first!, second!), `first ${describe(first!)}; then ${describe(second!)}`),
});

/** The second request was answered `status` (one of them), and for `problem`, as application/problem+json. */
const secondAnswered = (scenario: string, statuses: number[], says: string, problem = false): Check => ({
  scenario,
  says,
  judge: ({ second }) => {
    if (!statuses.includes(second!.status)) return fail(`answered ${describe(second!)}`);
    return expect(
      !problem || (second!.headers['content-type'] ?? '').startsWith('application/problem+json'),
      `answered ${second!.status} as ${second!.headers['content-type'] ?? 'no content type'}, not problem+json`,
    );
  },
});

/** A key refused: a 400 (an MCP tool: an error result, the tool not run). The header's syntax is HTTP's alone. */
const keyRefused = (which: 'missing' | 'empty' | 'long' | 'list', says: string): Check => ({
  scenario: 'keys',
  says,
  judge: ({ keys, mcp }) => {
    const answer = keys![which];
    if (!mcp) return expect(answer.status === 400, `answered ${describe(answer)}`);
    if (which === 'list') return skip('an MCP key is any string: a list is a header form');
    return expect(answer.status >= 400, `answered ${describe(answer)}`);
  },
});

/**
 * Statuses the module does not store (docs/replays.md): the retry runs again. Written here, apart from the library:
 * the kit judges the module from outside, and a change there must not change what the kit expects.
 */
const RELEASED = [400, 401, 407, 408, 409, 422, 429];

/** Headers a replay carries as they were (docs/replays.md), when the first answer had them. */
const REPLAYED_HEADERS = ['content-type', 'location', 'content-disposition', 'etag'];

export const CHECKS = {
  'repeat.succeeds': {
    scenario: 'repeat',
    says: 'the request under test succeeds (2xx): the other checks are about it',
    judge: ({ first }) => expect(success(first!), `answered ${describe(first!)}: check --url, --body and --header`),
  },
  'repeat.same-answer': secondGetsFirst('repeat', 'a retry gets the first answer: its status and body, byte for byte'),
  'repeat.replay-marker': {
    scenario: 'repeat',
    says: 'a replay says so: Idempotent-Replayed: true',
    judge: ({ second }) =>
      expect(replayed(second!), `Idempotent-Replayed is ${second!.headers['idempotent-replayed'] ?? 'absent'}`),
  },
  'repeat.headers': {
    scenario: 'repeat',
    says: `a replay carries the first answer's ${REPLAYED_HEADERS.join(', ')}`,
    judge: ({ first, second }) => {
      const differ = REPLAYED_HEADERS.filter(
        (name) => first!.headers[name] !== undefined && first!.headers[name] !== second!.headers[name],
      );
      return expect(
        differ.length === 0,
        differ.map((name) => `${name}: ${first!.headers[name]} then ${second!.headers[name] ?? 'absent'}`).join('; '),
      );
    },
  },
  'repeat.once': once('repeat', 'a request sent twice'),
  'storm.once': once('storm', 'a storm of concurrent duplicates'),
  'storm.one-answer': {
    scenario: 'storm',
    says: 'every duplicate of the storm gets the one answer, or a 409 that a retry turns into it',
    judge: ({ answers, finals }) => {
      const one = finals!.find(success) ?? finals![0];
      const early = answers!.find((each) => each.status !== 409 && !sameAnswer(each, one));
      if (early) return fail(`${describe(early)} besides ${describe(one)}`);
      const late = finals!.find((each) => !sameAnswer(each, one));
      return expect(!late, `after retrying: ${describe(late ?? one)} besides ${describe(one)}`);
    },
  },
  'storm.retry-after': {
    scenario: 'storm',
    says: 'a 409 says when to retry (Retry-After)',
    judge: ({ answers }) => {
      const bare = answers!.filter((each) => each.status === 409 && each.headers['retry-after'] === undefined);
      return expect(bare.length === 0, `${bare.length} of the 409s had no Retry-After`);
    },
  },
  'other-body.422': secondAnswered('other-body', [422], 'the same key with another body is a 422'),
  'other-body.problem': secondAnswered(
    'other-body',
    [422],
    'the same key with another body is a 422 problem+json',
    true,
  ),
  'other-body.400': secondAnswered(
    'other-body',
    [400],
    'the same key with other parameters is a 400 (idempotency_error)',
  ),
  'other-body.once': once('other-body', 'the first of two requests with one key and two bodies'),
  'other-route.not-mixed': {
    scenario: 'other-route',
    says: "the same key on another route or method never gets the first route's answer",
    judge: ({ first, second }) =>
      expect(
        !replayed(second!) && !sameAnswer(first!, second!),
        `it got ${describe(second!)}, the first route's answer`,
      ),
  },
  'keys.missing': keyRefused('missing', 'a request without a key is a 400'),
  'keys.empty': keyRefused('empty', 'an empty key is a 400'),
  'keys.long': keyRefused('long', 'a key over 255 characters is a 400'),
  'keys.list': keyRefused('list', 'a list of keys ("a, b") is a 400'),
  'keys.quoted': {
    scenario: 'keys',
    says: 'a key in the structured-field string form ("…") is accepted, and its retry replayed',
    judge: ({ first, second, mcp }) =>
      mcp
        ? skip('an MCP key is any string: the quoted form is a header form')
        : expect(
            success(first!) && sameAnswer(first!, second!),
            `first ${describe(first!)}; then ${describe(second!)}`,
          ),
  },
  'json-form.same-request': secondGetsFirst(
    'json-form',
    'JSON that differs only in member order and spacing is the same request: the first answer',
  ),
  'json-form.once': once('json-form', 'a request re-sent as reformatted JSON'),
  'failing-first.module': {
    scenario: 'failing-first',
    says: `a 5xx or a ${RELEASED.join(', ')} is not stored (the retry runs again); another 4xx is replayed`,
    judge: ({ first, second }) => {
      if (success(first!)) return fail(`--fail-body was answered ${describe(first!)}`);
      if (first!.status >= 500 || RELEASED.includes(first!.status))
        return expect(!replayed(second!), `the ${first!.status} was stored: the retry got a replay`);
      return expect(
        replayed(second!) && sameAnswer(first!, second!),
        `first ${describe(first!)}; then ${describe(second!)}`,
      );
    },
  },
  'failing-first.error-replayed': {
    scenario: 'failing-first',
    says: 'the retry of a request answered with an error gets that error',
    judge: ({ first, second }) =>
      success(first!)
        ? fail(`--fail-body was answered ${describe(first!)}`)
        : expect(first!.status === second!.status, `first ${describe(first!)}; then ${describe(second!)}`),
  },
  'failing-first.5xx-replayed': {
    scenario: 'failing-first',
    says: 'a 500 is stored: its retry gets the same 500, marked Idempotent-Replayed',
    judge: ({ first, second }) =>
      first!.status < 500
        ? skip(`--fail-body was answered ${first!.status}: this is about a 5xx`)
        : expect(
            replayed(second!) && sameAnswer(first!, second!),
            `first ${describe(first!)}; then ${describe(second!)}`,
          ),
  },
  'large-body.answered': {
    scenario: 'large-body',
    says: 'a large body is answered and replayed, or refused with a 4xx: never a 5xx, never run twice',
    judge: ({ first, second, effects }) => {
      if (first!.status === 0 || first!.status >= 500) return fail(`answered ${describe(first!)}`);
      if (!success(first!)) return pass(`refused: ${first!.status}`);
      if (!sameAnswer(first!, second!)) return fail(`first ${describe(first!)}; then ${describe(second!)}`);
      return expect(effects === undefined || effects === 1, `it took effect ${effects} times`);
    },
  },
  'kill-window.once-or-none': {
    scenario: 'kill-window',
    says: 'a server killed at any moment of a request, then retried: it took effect once with its answer, or not at all',
    judge: ({ rungs }) => {
      const broken = rungs!.filter((rung) => rung.verdict !== 'once' && rung.verdict !== 'none');
      const seen = rungs!.map((rung) => `${rung.delayMs} ms ${rung.verdict}`).join(', ');
      return broken.length === 0
        ? pass(seen)
        : fail(broken.map((rung) => `killed at ${rung.delayMs} ms: ${rung.verdict}, ${rung.detail}`).join('; '));
    },
  },
} satisfies Record<string, Check>;

export type CheckId = keyof typeof CHECKS;
