import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { createIdempotentClient, IdempotentNotProcessedError } from 'nestjs-dynamodb-idempotency/client';
import { pastLease, scriptFleet } from '../support/script-fleet';
import { ScriptProcess } from '../support/script-process';

type Answer = { status: number; body: Record<string, unknown>; headers: Headers } | 'connection lost';

/**
 * Outcomes by key across real processes on dynalite (outcome-app.script.ts): `POST /jobs` is scoped by `x-tenant`,
 * `GET /jobs/outcome` is its `@IdempotentOutcome('POST /jobs')` door. A client that kept only the key asks the door.
 */
describe('outcomes by key across processes (dynalite)', () => {
  const fleet = scriptFleet({ script: join(__dirname, 'outcome-app.script.ts'), name: 'outcomes', file: 'RUNS_FILE' });
  const instance = fleet.start;
  /** The runs of one payload. */
  const runs = (payload: string) => fleet.lines((line) => line.startsWith(`${payload} `));
  const answer = (response: Promise<Response>): Promise<Answer> =>
    response.then(
      async (got) => ({
        status: got.status,
        body: (await got.json()) as Record<string, unknown>,
        headers: got.headers,
      }),
      () => 'connection lost' as const,
    );
  const job = (url: string, key: string, payload: string, tenant = 'acme') =>
    answer(
      fetch(`${url}/jobs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-tenant': tenant },
        body: JSON.stringify({ payload }),
      }),
    );
  const outcome = (
    url: string,
    key: string | undefined,
    { tenant = 'acme', prefer }: { tenant?: string; prefer?: string } = {},
  ) =>
    answer(
      fetch(`${url}/jobs/outcome`, {
        headers: {
          'x-tenant': tenant,
          ...(key === undefined ? {} : { 'idempotency-key': key }),
          ...(prefer === undefined ? {} : { prefer }),
        },
      }),
    );
  const started_ = async (process: ScriptProcess, payload: string) => {
    for (let tries = 0; !process.output().includes(`job started ${payload}`); tries++) {
      if (tries > 200) throw new Error(`the job ${payload} never started:\n${process.output()}`);
      await sleep(25);
    }
  };

  it('the first process dies mid-call, another finishes it; a third answers the key alone with that answer, to its own caller only', async () => {
    const key = `died-${Date.now()}`;
    const [dying, finishing, asked] = await Promise.all([instance({ JOB_MS: '60000' }), instance(), instance()]);
    const lost = job(dying.url, key, 'died');
    await started_(dying.process, 'died');
    await dying.process.kill();
    expect(await lost).toBe('connection lost');
    // Another delivery of the same request (a queue's, a colleague's), once the dead owner's lease has ended.
    const finished = await pastLease(() => job(finishing.url, key, 'died'));
    expect(finished).toMatchObject({ status: 201, body: { payload: 'died', ranBy: finishing.pid } });

    const byKey = await outcome(asked.url, key);
    expect(byKey).toMatchObject({ status: 201, body: (finished as { body: unknown }).body });
    expect((byKey as { headers: Headers }).headers.get('idempotent-replayed')).toBe('true');
    expect(runs('died')).toEqual([`died ${finishing.pid}`]);

    // Another caller's key is never seen; a request without a key is refused.
    expect(await outcome(asked.url, key, { tenant: 'someone-else' })).toMatchObject({
      status: 404,
      body: { type: ProblemType.outcomeNotFound, state: 'unknown' },
    });
    expect(await outcome(asked.url, undefined)).toMatchObject({ status: 400, body: { type: ProblemType.keyMissing } });
  }, 60_000);

  it('in flight: 409 with Retry-After; with Prefer: wait=10 the answer comes as the run completes', async () => {
    const key = `slow-${Date.now()}`;
    const [slow, asked] = await Promise.all([instance({ JOB_MS: '1500' }), instance()]);
    const first = job(slow.url, key, 'slow');
    await started_(slow.process, 'slow');
    const busy = await outcome(asked.url, key);
    expect(busy).toMatchObject({ status: 409, body: { type: ProblemType.inFlight } });
    expect((busy as { headers: Headers }).headers.get('retry-after')).toMatch(/^\d+$/);

    const since = performance.now();
    const waited = await outcome(asked.url, key, { prefer: 'respond-async, wait=10' });
    const tookMs = performance.now() - since;
    const done = await first;
    expect(waited).toMatchObject({ status: 201, body: (done as { body: unknown }).body });
    expect((waited as { headers: Headers }).headers.get('preference-applied')).toBe('wait=10');
    expect(tookMs).toBeLessThan(10_000); // it ended at the completion, not at the wait's end
  }, 60_000);

  it('the retrying client: a stream body whose answer was lost is answered by the door; one that never arrived is said not processed', async () => {
    const [server] = await Promise.all([instance()]);
    const stream = (text: string) =>
      new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(JSON.stringify({ payload: text })));
          controller.close();
        },
      });
    const outcomes = { 'POST /jobs': '/jobs/outcome' };
    const headers = { 'content-type': 'application/json', 'x-tenant': 'acme' };
    // The request reaches the server and runs; its answer is lost on the way back (a reset connection).
    const losingAnswers: typeof fetch = async (url, init) => {
      const response = await fetch(url, init);
      if (init?.method !== 'POST') return response;
      await response.arrayBuffer();
      throw new TypeError('fetch failed', { cause: new Error('socket hang up') });
    };
    const client = createIdempotentClient({ baseUrl: server.url, outcomes, fetch: losingAnswers });
    const answered = await client.request<{ payload: string; ranBy: number }>('POST', '/jobs', {
      body: stream('streamed'),
      headers,
    });
    expect(answered).toMatchObject({ status: 201, replayed: true, body: { payload: 'streamed', ranBy: server.pid } });
    expect(runs('streamed')).toHaveLength(1);

    // The request never reaches the server: the door knows nothing of its key, and the stream cannot go again.
    const losingRequests: typeof fetch = async (url, init) => {
      if (init?.method === 'POST') throw new TypeError('fetch failed', { cause: new Error('ECONNRESET') });
      return fetch(url, init);
    };
    const unlucky = createIdempotentClient({ baseUrl: server.url, outcomes, fetch: losingRequests });
    await expect(unlucky.request('POST', '/jobs', { body: stream('lost'), headers })).rejects.toThrow(
      IdempotentNotProcessedError,
    );
    expect(runs('lost')).toHaveLength(0);
  }, 60_000);
});
