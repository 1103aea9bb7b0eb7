import { backoffMs, retryAfterMs } from './retry-delay';

/**
 * The server says a call was not processed (its outcome door has no outcome for the key: the request never arrived, or
 * it failed and was released), and its body, a stream, cannot be sent again. Send the data again as a new call.
 */
export class IdempotentNotProcessedError extends Error {
  override name = 'IdempotentNotProcessedError';
  constructor(
    readonly key: string,
    readonly state: unknown,
    cause: unknown,
  ) {
    super(
      `the call with key ${key} was not processed (the server has no outcome for it: ${String(state)}), and its body ` +
        'cannot be sent again',
      { cause },
    );
  }
}

/**
 * After an ambiguous failure of a call whose body cannot be sent again (a stream): asks the server's outcome door
 * (`@IdempotentOutcome()`, a GET with the key) until it answers with the call's outcome, within the call's time. 409 in
 * flight, 429 and 503 are asked again after `Retry-After` (the door waits up to 10 s itself, `Prefer: wait`); network
 * errors after a backoff; 404 throws `IdempotentNotProcessedError`.
 */
export async function askOutcomeDoor(
  send: typeof fetch,
  door: string,
  headers: Headers,
  deadline: number,
  signalFor: (remainingMs: number) => AbortSignal,
  key: string,
  cause: unknown,
  caller?: AbortSignal,
): Promise<Response> {
  for (let asked = 1; ; asked++) {
    caller?.throwIfAborted();
    const left = deadline - performance.now();
    if (left <= 0) throw cause;
    headers.set('prefer', `wait=${Math.max(0, Math.min(10, Math.floor(left / 1000) - 1))}`);
    let response: Response;
    try {
      response = await send(door, { method: 'GET', headers, signal: signalFor(left) });
    } catch (error) {
      caller?.throwIfAborted();
      cause = error;
      await pause(backoffMs(asked), deadline);
      continue;
    }
    if (response.status === 404) {
      const body = (await response.json().catch(() => ({}))) as { state?: unknown };
      throw new IdempotentNotProcessedError(key, body.state ?? 'unknown', cause);
    }
    const asksAgain = response.status === 409 || response.status === 429 || response.status === 503;
    if (!asksAgain) return response;
    await response.arrayBuffer();
    await pause(retryAfterMs(response.headers.get('retry-after')) ?? backoffMs(asked), deadline);
  }
}

function pause(ms: number, deadline: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(ms, deadline - performance.now()))));
}
