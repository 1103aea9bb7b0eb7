import { setTimeout as sleep } from 'node:timers/promises';
import { Answer, retryAfterMs, Sent, Target } from './http-target';
import type { ConformanceOptions } from './options';
import { Random } from './random';

/** What a scenario saw; the profiles' requirements judge it. */
export interface Facts {
  /** Why the scenario did not run (a flag it needs is missing). */
  skipped?: string;
  /** An MCP tool's key is an argument (any string), not a header: the header's syntax does not apply. */
  mcp?: boolean;
  first?: Answer;
  second?: Answer;
  /** The storm's answers, then each one's final answer after its 409s were retried as `Retry-After` says. */
  answers?: Answer[];
  finals?: Answer[];
  /** How often the scenario's key took effect; `undefined` without `--effects-url`. */
  effects?: number;
  /** The answers to a missing, empty, over-long and listed key. */
  keys?: Record<'missing' | 'empty' | 'long' | 'list', Answer>;
  /** The kill window's rungs. */
  rungs?: Rung[];
}

/** One rung of the kill window: killed `delayMs` after sending; its verdict, in Doubletap's words. */
export interface Rung {
  delayMs: number;
  verdict: 'none' | 'once' | 'twice' | 'torn' | 'unanswered';
  effects?: number;
  answer?: Answer;
  detail: string;
}

/** What a scenario runs with: the target, the options, fresh keys and the seeded randomness. */
export interface ScenarioContext {
  target: Target;
  options: ConformanceOptions;
  random: Random;
  key(): string;
}

export interface Scenario {
  name: string;
  summary: string;
  run(context: ScenarioContext): Promise<Facts>;
}

export const SCENARIOS: Scenario[] = [
  {
    name: 'repeat',
    summary: 'the same request twice, one after the other',
    run: (context) => sentTwice(context),
  },
  {
    name: 'storm',
    summary: 'concurrent duplicates of a new key; each 409 retried after its Retry-After',
    async run({ target, options, random, key }) {
      const k = key();
      // Each duplicate is a client of its own: its 409 is retried as soon as its Retry-After allows, not after the rest.
      const sent = await Promise.all(
        Array.from({ length: options.storm }, async () => {
          await sleep(random.below(3));
          const answer = await target.send({ key: k });
          return { answer, final: await retried(answer, () => target.send({ key: k }), options.patienceMs) };
        }),
      );
      const answers = sent.map((each) => each.answer);
      const finals = sent.map((each) => each.final);
      return { answers, finals, effects: await target.effects(k) };
    },
  },
  {
    name: 'other-body',
    summary: 'the same key with another body',
    async run(context) {
      const other = context.options.otherBody ?? otherBody(context.options.body);
      if (other === undefined) return { skipped: 'no body to change: give --other-body' };
      return sentTwice(context, {}, { body: other });
    },
  },
  {
    name: 'other-route',
    summary: 'the same key on another route or method',
    async run({ target, options, key }) {
      if (!options.otherUrl && !options.otherMethod) return { skipped: 'give --other-url or --other-method' };
      const k = key();
      const first = await target.send({ key: k });
      const second = await target.send({
        key: k,
        ...(options.otherUrl ? { url: options.otherUrl } : {}),
        ...(options.otherMethod ? { method: options.otherMethod } : {}),
      });
      return { first, second };
    },
  },
  {
    name: 'keys',
    summary: "a missing, empty, over-long and listed key; a key in the draft's quoted form, sent twice",
    async run({ target, options, key }) {
      const keys = {
        missing: await target.send({ key: null }),
        empty: await target.send({ key: '', rawKey: '' }),
        long: await target.send({ key: 'k'.repeat(256) }),
        list: await target.send({ key: key(), rawKey: `${key()}, ${key()}` }),
      };
      const k = key();
      const first = await target.send({ key: k, rawKey: `"${k}"` });
      const second = await target.send({ key: k, rawKey: `"${k}"` });
      return { keys, first, second, effects: await target.effects(k), mcp: options.mcp !== undefined };
    },
  },
  {
    name: 'json-form',
    summary: 'the same JSON again, its members in another order and spaced differently',
    async run(context) {
      const reformatted = reordered(context.options.body);
      if (reformatted === undefined) return { skipped: 'the body is not a JSON object with two members or more' };
      return sentTwice(context, {}, { body: reformatted });
    },
  },
  {
    name: 'failing-first',
    summary: 'a first attempt the route answers with an error, then its retry',
    async run(context) {
      const body = context.options.failBody;
      if (body === undefined) return { skipped: 'give --fail-body (a body the route answers with an error)' };
      return sentTwice(context, { body });
    },
  },
  {
    name: 'large-body',
    summary: 'a large body, twice',
    async run(context) {
      const body = padded(context.options.body, context.random.text(context.options.largeBytes));
      if (body === undefined) return { skipped: 'the body is not a JSON object' };
      return sentTwice(context, { body });
    },
  },
];

/** Two requests under one new key, one after the other (`second` defaults to `first`), then the key's effect count. */
async function sentTwice(
  { target, key }: ScenarioContext,
  first: Omit<Sent, 'key'> = {},
  second: Omit<Sent, 'key'> = first,
): Promise<Facts> {
  const k = key();
  const answer = await target.send({ ...first, key: k });
  return { first: answer, second: await target.send({ ...second, key: k }), effects: await target.effects(k) };
}

/**
 * An answer's final form: while `retryable` says so (a 409 by default), the request is sent again after the answer's
 * `Retry-After` (else `defaultWaitMs`) until `patienceMs` has passed; the last answer.
 */
export async function retried(
  answer: Answer,
  send: () => Promise<Answer>,
  patienceMs: number,
  retryable = (each: Answer) => each.status === 409,
  defaultWaitMs = 1000,
): Promise<Answer> {
  const until = Date.now() + patienceMs;
  while (retryable(answer) && Date.now() < until) {
    await sleep(Math.min(retryAfterMs(answer) ?? defaultWaitMs, Math.max(0, until - Date.now())));
    answer = await send();
  }
  return answer;
}

function jsonObject(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The body with its first number incremented, or else its first string changed: another request of the same shape. */
export function otherBody(text: string | undefined): string | undefined {
  const body = jsonObject(text);
  if (!body) return undefined;
  const entries = Object.entries(body);
  const number = entries.find(([, value]) => typeof value === 'number');
  if (number) return JSON.stringify({ ...body, [number[0]]: (number[1] as number) + 1 });
  const string = entries.find(([, value]) => typeof value === 'string');
  if (string) return JSON.stringify({ ...body, [string[0]]: `${string[1] as string}-other` });
  return JSON.stringify({ ...body, conformanceOther: true });
}

/** The same JSON object, members reversed and spaced out: equal as JSON, different as bytes. */
function reordered(text: string | undefined): string | undefined {
  const body = jsonObject(text);
  if (!body || Object.keys(body).length < 2) return undefined;
  const reversed = Object.fromEntries(Object.entries(body).reverse());
  const spaced = JSON.stringify(reversed, null, 2);
  return spaced === text ? JSON.stringify(reversed) : spaced;
}

function padded(text: string | undefined, padding: string): string | undefined {
  const body = jsonObject(text);
  return body && JSON.stringify({ ...body, conformancePadding: padding });
}
