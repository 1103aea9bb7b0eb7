import type { ConformanceOptions } from './options';

/** One answer as the kit saw it: status 0 when none came (`error` says why: refused, reset, timed out). */
export interface Answer {
  status: number;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: Buffer;
  error?: string;
}

/** One request of a scenario: the route's own unless it says otherwise. `key: null` sends no key. */
export interface Sent {
  key: string | null;
  /** The key header's value exactly as sent (a quoted or listed key); the key itself otherwise. */
  rawKey?: string;
  body?: string;
  url?: string;
  method?: string;
}

/** What the kit talks to: an HTTP route, or an MCP tool whose results read as HTTP answers. */
export interface Target {
  send(request: Sent): Promise<Answer>;
  /** How often the key's request took effect, from `--effects-url`; `undefined` without it. */
  effects(key: string): Promise<number | undefined>;
}

/** Whether an answer says it is a replay (`Idempotent-Replayed: true`, as Stripe and this module send). */
export const replayed = (answer: Answer) => answer.headers['idempotent-replayed']?.trim().toLowerCase() === 'true';

/** The seconds an answer asks the client to wait (`Retry-After`: seconds or an HTTP date); `undefined` without. */
export function retryAfterMs(answer: Answer): number | undefined {
  const value = answer.headers['retry-after']?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** An answer's text, shortened for a report. */
export function describe(answer: Answer): string {
  if (answer.status === 0) return `no answer (${answer.error})`;
  const text = answer.body.toString('utf8').replace(/\s+/g, ' ');
  return `${answer.status} ${text.length > 120 ? `${text.slice(0, 117)}...` : text}`;
}

/** Whether two answers are the same answer: status and body bytes. */
export const sameAnswer = (a: Answer, b: Answer) => a.status === b.status && a.body.equals(b.body);

/** An HTTP route under test. */
export class HttpTarget implements Target {
  constructor(private readonly options: ConformanceOptions) {}

  send(request: Sent): Promise<Answer> {
    const { options } = this;
    const headers: Record<string, string> = { ...options.headers };
    const body = request.body ?? options.body;
    if (body !== undefined && !Object.keys(headers).some((name) => name.toLowerCase() === 'content-type'))
      headers['content-type'] = 'application/json';
    if (request.key !== null) headers[options.keyHeader] = request.rawKey ?? request.key;
    const method = request.method ?? options.method;
    return fetchAnswer(request.url ?? options.url, {
      method,
      headers,
      ...(body === undefined || method === 'GET' || method === 'HEAD' ? {} : { body }),
      signal: AbortSignal.timeout(options.timeoutMs),
    });
  }

  async effects(key: string): Promise<number | undefined> {
    return effectsOf(this.options, key);
  }
}

/** Reads `--effects-url` for a key: a number, or a JSON list whose length is the count. */
export async function effectsOf(options: ConformanceOptions, key: string): Promise<number | undefined> {
  if (!options.effectsUrl) return undefined;
  const url = options.effectsUrl.includes('{key}')
    ? options.effectsUrl.replaceAll('{key}', encodeURIComponent(key))
    : `${options.effectsUrl}${options.effectsUrl.includes('?') ? '&' : '?'}key=${encodeURIComponent(key)}`;
  const answer = await fetchAnswer(url, {
    headers: options.headers,
    signal: AbortSignal.timeout(options.timeoutMs),
  });
  if (answer.status < 200 || answer.status > 299) throw new TargetError(`--effects-url answered ${describe(answer)}`);
  let value: unknown;
  try {
    value = JSON.parse(answer.body.toString('utf8'));
  } catch {
    throw new TargetError(`--effects-url answered ${describe(answer)}: not a number or a JSON list`);
  }
  if (Array.isArray(value)) return value.length;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  throw new TargetError(`--effects-url answered ${describe(answer)}: not a number or a JSON list`);
}

/** The target cannot be checked at all (its effects endpoint is wrong, it never started): exit 2. */
export class TargetError extends Error {}

/** Sends a request; a network failure is an answer with status 0, never a throw. */
export async function fetchAnswer(url: string, init: RequestInit): Promise<Answer> {
  try {
    const response = await fetch(url, init);
    const headers: Record<string, string> = {};
    response.headers.forEach((value, name) => (headers[name.toLowerCase()] = value));
    return { status: response.status, headers, body: Buffer.from(await response.arrayBuffer()) };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return { status: 0, headers: {}, body: Buffer.alloc(0), error: cause ?? (error as Error).name };
  }
}
