import { DEFAULT_CLIENT_MAX_ELAPSED_MS } from '../idempotency.constants';
import { IN_FLIGHT_PROBLEM_TYPE } from './problem-type';
import { derivedKey, stepKey } from './derived-key';
import { backoffMs, retryAfterMs } from './retry-delay';
import { askOutcomeDoor, IdempotentNotProcessedError } from './outcome-door';

/** Options of `createIdempotentClient`. */
export interface IdempotentClientOptions {
  /** Prefixed to relative URLs (`new URL(url, baseUrl)`). */
  baseUrl?: string;
  /** The key header. Default `Idempotency-Key`. */
  keyHeader?: string;
  /**
   * Attempts per logical call that end in a fault (no answer, 429, 503), the first included. Default 5. Waiting out a
   * 409 in flight (an owner still running, or a crashed one's lease) is bounded by `maxElapsedMs` alone.
   */
  maxAttempts?: number;
  /**
   * How long one logical call may take, its attempts and waits included: an attempt still unanswered then is aborted,
   * and no retry starts after it. Default 90 s: longer than a crashed owner holds a key on the module's defaults
   * (its 60 s lease and the clock-skew margin).
   */
  maxElapsedMs?: number;
  /** The `fetch` to use. Default the global one. */
  fetch?: typeof fetch;
  /**
   * The outcome doors the server declares (`@IdempotentOutcome()`), by call: `{ 'POST /uploads': '/uploads/outcome' }`
   * (the method and the path as passed to `request`). A call with a stream body is sent once; after an ambiguous
   * failure it asks its door for the outcome by key instead of giving up (docs/outcomes-by-key.md).
   */
  outcomes?: Record<string, string>;
}

/** One logical call. */
export interface IdempotentRequestOptions {
  /**
   * JSON-encoded unless it is a string, bytes, `FormData`, `URLSearchParams` or a `Blob`. A stream is sent once, and
   * only to a call with an outcome door (`outcomes`, `outcomeUrl`): a retry could not send it again.
   */
  body?: unknown;
  headers?: Record<string, string>;
  /**
   * The call's key. Default: `deriveKey(name)` inside a protected call when `name` is given; else, inside a step
   * (`IdempotencyContext.step`), the step's key, for the step's first such call only (a second one without `key` or
   * `name` throws before it is sent); else a new UUID.
   */
  key?: string;
  /** Inside a protected call: the key is the call's `deriveKey(name)`, the same on every retry of the parent. */
  name?: string;
  /** Aborts the call, its waits included. */
  signal?: AbortSignal;
  /** This call's outcome door (a GET of the key), over the client's `outcomes`. */
  outcomeUrl?: string;
}

/** The answer to a logical call: its last attempt's. */
export interface IdempotentResponse<T = unknown> {
  status: number;
  headers: Headers;
  /** JSON when the response says so (`application/json`, `application/problem+json`), else text. */
  body: T;
  /** `Idempotent-Replayed: true`: the server answered with the stored response of an earlier request. */
  replayed: boolean;
  attempts: number;
  /** The key every attempt carried. */
  key: string;
}

/**
 * Every attempt of a logical call failed on the network (no answer, a connection reset, an answer cut off mid-body,
 * or no answer within `maxElapsedMs`): the last error is the `cause`.
 */
export class IdempotentRequestError extends Error {
  override name = 'IdempotentRequestError';
  constructor(
    readonly attempts: number,
    readonly key: string,
    cause: unknown,
  ) {
    super(`no answer after ${attempts} attempt(s) with key ${key}: ${String(cause)}`, { cause });
  }
}

export interface IdempotentClient {
  request<T = unknown>(method: string, url: string, options?: IdempotentRequestOptions): Promise<IdempotentResponse<T>>;
}

/**
 * A client that retries a non-idempotent call safely: one key per logical call, the same on every attempt, so that the
 * server (this module, or any that follows the IETF Idempotency-Key draft) runs it once. Retried: network errors, 409
 * in flight (the module's problem type, or any 409 with `Retry-After`), 429 and 503, honouring `Retry-After`, else
 * exponential backoff with full jitter. Never retried: other 4xx. When the attempts or the time run out, the last answer
 * is returned, or an `IdempotentRequestError` (its `cause` the last network error) thrown. Imports nothing from Nest or
 * the AWS SDK.
 */
export function createIdempotentClient(options: IdempotentClientOptions = {}): IdempotentClient {
  const {
    baseUrl,
    keyHeader = 'Idempotency-Key',
    maxAttempts = 5,
    maxElapsedMs = DEFAULT_CLIENT_MAX_ELAPSED_MS,
    fetch: send = globalThis.fetch,
    outcomes = {},
  } = options;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new RangeError('maxAttempts must be an integer ≥ 1');
  if (!(maxElapsedMs >= 0)) throw new RangeError('maxElapsedMs must be a number of milliseconds ≥ 0');
  return {
    async request<T>(method: string, url: string, call: IdempotentRequestOptions = {}) {
      const door = call.outcomeUrl ?? outcomes[`${method.toUpperCase()} ${url}`];
      const once = isStream(call.body);
      if (once && door === undefined) {
        throw new TypeError(
          'IdempotentClient: a stream body cannot be sent again on a retry; pass its bytes (a Buffer, a string, a Blob), ' +
            "or declare the call's outcome door (outcomes, outcomeUrl) so that its outcome is asked by key instead.",
        );
      }
      const key =
        call.key ?? (call.name === undefined ? (stepKey() ?? globalThis.crypto.randomUUID()) : derivedKey(call.name));
      const target = baseUrl === undefined ? url : new URL(url, baseUrl).toString();
      const init = requestInit(method, call, keyHeader, key);
      const resolve = (path: string) => (baseUrl === undefined ? path : new URL(path, baseUrl).toString());
      const signalFor = (left: number) => attemptSignal(call.signal, left);
      const deadline = performance.now() + maxElapsedMs;
      for (let attempt = 1, faults = 0; ; attempt++) {
        let answer: IdempotentResponse<T>;
        try {
          // The whole answer, its body included, within what is left of the call's time.
          const signal = attemptSignal(call.signal, deadline - performance.now());
          answer = await answerOf<T>(await send(target, { ...init, signal }), attempt, key);
        } catch (error) {
          if (call.signal?.aborted) throw error;
          if (once) {
            // Sent, and no answer: it may have run. Its body cannot go again; its outcome is asked by its key.
            const headers = new Headers({ [keyHeader]: key, ...(call.headers ?? {}) });
            headers.delete('content-type');
            const asked = askOutcomeDoor(send, resolve(door!), headers, deadline, signalFor, key, error, call.signal);
            return await answerOf<T>(await asked.catch(rethrownAs(attempt, key, call.signal)), attempt, key);
          }
          const delay = backoffMs(attempt);
          if (++faults >= maxAttempts || performance.now() + delay > deadline) {
            throw new IdempotentRequestError(attempt, key, error);
          }
          await wait(delay, call.signal);
          continue;
        }
        const retry = once ? undefined : retryDelay(answer, attempt);
        if (retry === undefined || (retry.fault && ++faults >= maxAttempts)) return answer;
        if (performance.now() + retry.delay > deadline) return answer;
        await wait(retry.delay, call.signal);
      }
    },
  };
}

/**
 * A network error of the door past the call's time, as the call's own (`IdempotentRequestError`); the door's "not
 * processed" and the caller's abort as they are.
 */
function rethrownAs(attempts: number, key: string, caller?: AbortSignal) {
  return (error: unknown): never => {
    if (error instanceof IdempotentNotProcessedError || caller?.aborted) throw error;
    throw new IdempotentRequestError(attempts, key, error);
  };
}

/** An attempt's signal: the caller's, and the call's deadline. */
function attemptSignal(caller: AbortSignal | undefined, remainingMs: number): AbortSignal {
  const deadline = AbortSignal.timeout(Math.max(0, Math.ceil(remainingMs)));
  return caller ? AbortSignal.any([caller, deadline]) : deadline;
}

function requestInit(method: string, call: IdempotentRequestOptions, keyHeader: string, key: string): RequestInit {
  const headers = new Headers(call.headers);
  headers.set(keyHeader, key);
  let body = call.body as RequestInit['body'];
  if (call.body !== undefined && !isRawBody(call.body) && !isStream(call.body)) {
    body = JSON.stringify(call.body);
    if (!headers.has('content-type')) headers.set('content-type', 'application/json');
  }
  // A stream is sent as it is read (fetch needs `duplex: 'half'` for it).
  const duplex = isStream(call.body) ? { duplex: 'half' as const } : {};
  return { method: method.toUpperCase(), headers, body, signal: call.signal, ...duplex };
}

/** A web `ReadableStream`, or a Node stream or async iterable: read once, so never re-sent. */
function isStream(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  if (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream) return true;
  return typeof (body as { pipe?: unknown }).pipe === 'function' || Symbol.asyncIterator in body;
}

function isRawBody(body: unknown): boolean {
  return (
    typeof body === 'string' ||
    body instanceof ArrayBuffer ||
    ArrayBuffer.isView(body) ||
    body instanceof URLSearchParams ||
    body instanceof FormData ||
    body instanceof Blob
  );
}

async function answerOf<T>(response: Response, attempts: number, key: string): Promise<IdempotentResponse<T>> {
  const text = await response.text();
  const json = /^application\/([\w.+-]+\+)?json\b/i.test(response.headers.get('content-type') ?? '');
  let body: unknown = text;
  if (json && text.length > 0) {
    try {
      body = JSON.parse(text);
    } catch {
      // kept as text: the server said JSON and sent something else
    }
  }
  return {
    status: response.status,
    headers: response.headers,
    body: body as T,
    replayed: response.headers.get('idempotent-replayed') === 'true',
    attempts,
    key,
  };
}

/** How long to wait before retrying this answer, or undefined when it is not retried. */
/**
 * How long to wait before retrying this answer, and whether it counts as a fault (`maxAttempts`): undefined when it is
 * not retried. A 409 in flight is no fault: the key's owner is running, or its lease has yet to end.
 */
function retryDelay(
  answer: IdempotentResponse<unknown>,
  attempt: number,
): { delay: number; fault: boolean } | undefined {
  const retryAfter = retryAfterMs(answer.headers.get('retry-after'));
  const inFlight =
    answer.status === 409 &&
    (retryAfter !== undefined || (answer.body as { type?: unknown } | null)?.type === IN_FLIGHT_PROBLEM_TYPE);
  if (!inFlight && answer.status !== 429 && answer.status !== 503) return undefined;
  return { delay: retryAfter ?? backoffMs(attempt), fault: !inFlight };
}

function wait(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
