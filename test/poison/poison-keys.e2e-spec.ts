import { hostname } from 'node:os';
import { join } from 'node:path';
import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { pastLease, scriptFleet } from '../support/script-fleet';

type Answer = { status: number; body: Record<string, unknown>; replayed: string | null } | 'connection lost';

/**
 * Poison keys across real processes on dynalite: `POST /jobs` SIGKILLs its own process on an instance started with
 * CRASH (poison-app.script.ts, on the module's defaults but for a 2 s lease). Its client retries with the same key, as it
 * should; each retry after the lease takes the key over on another process. After `maxCrashedOwners` (default 3) such
 * owners, the next claim stores the key as poisoned instead of running the handler, and an operator's `keys:release`
 * lets it run again once the fix is deployed. The handler's own file of runs says what ran where.
 */
describe('poison keys across processes (dynalite)', () => {
  const fleet = scriptFleet({
    script: join(__dirname, 'poison-app.script.ts'),
    name: 'poison',
    file: 'RUNS_FILE',
    cli: true,
  });
  const instances = (count: number, extra: Record<string, string> = {}) =>
    Promise.all(Array.from({ length: count }, () => fleet.start(extra)));
  /** The runs of one payload. */
  const runs = (payload: string) => fleet.lines((line) => line.startsWith(`${payload} `));
  const job = (url: string, key: string, payload: string): Promise<Answer> =>
    fetch(`${url}/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ payload }),
    }).then(
      async (response) => ({
        status: response.status,
        body: (await response.json()) as Record<string, unknown>,
        replayed: response.headers.get('idempotent-replayed'),
      }),
      () => 'connection lost' as const, // with the process
    );
  /** The client's retry: 409 while the dead owner's lease runs (its `Retry-After`), until another answer. */
  const retried = (url: string, key: string, payload: string) => pastLease(() => job(url, key, payload));
  const cli = fleet.cli;

  it('three owners killed by one payload: the fourth does not run it, and it and every duplicate answer 500 key-poisoned naming the dead processes; keys:release after the fix lets it run', async () => {
    const key = `poison-${Date.now()}`;
    const [a, b, c, d, e] = await instances(5, { CRASH: '1' });
    expect(await job(a.url, key, 'poison')).toBe('connection lost');
    expect(await retried(b.url, key, 'poison')).toBe('connection lost');
    expect(await retried(c.url, key, 'poison')).toBe('connection lost');
    const dead = [a, b, c].map(({ pid }) => `${hostname().slice(0, 100)}:${pid}`);

    const poisoned = await retried(d.url, key, 'poison');
    expect(poisoned).toMatchObject({
      status: 500,
      body: { type: ProblemType.keyPoisoned, title: 'Idempotency key poisoned', crashedOwners: 3, owners: dead },
    });
    expect(String((poisoned as { body: Record<string, unknown> }).body.detail)).toContain(dead.join(', '));
    // The handler ran on the three dead processes only; every duplicate, anywhere, gets the same problem.
    expect(runs('poison')).toEqual([a, b, c].map(({ pid }) => `poison ${pid}`));
    for (const url of [d.url, e.url]) expect(await job(url, key, 'poison')).toEqual(poisoned);
    expect(runs('poison')).toHaveLength(3);

    const select = ['--route', 'POST /jobs', '--key', key];
    const inspected = await cli(['keys:inspect', ...select, '--json']);
    expect(inspected.code).toBe(0);
    expect((await cli(['keys:inspect', ...select])).stdout).toContain(`owners since its last clean end: ${dead[0]}`);
    expect(JSON.parse(inspected.stdout)).toMatchObject({
      status: 'FAILED',
      storedStatus: 500,
      owners: [...dead, `${hostname().slice(0, 100)}:${d.pid}`],
      poisoned: expect.stringContaining('keys:release lets it run again'),
    });

    // The fix is deployed; the operator releases the key; the client's next retry runs the handler once.
    const [fixed] = await instances(1);
    const released = await cli(['keys:release', ...select]);
    expect(released).toMatchObject({ code: 0, stdout: expect.stringContaining('released a poisoned key') });
    expect(await job(fixed.url, key, 'poison')).toMatchObject({ status: 201, body: { ranBy: fixed.pid } });
    expect(await job(e.url, key, 'poison')).toMatchObject({ status: 201, replayed: 'true' });
    expect(runs('poison')).toEqual([...[a, b, c].map(({ pid }) => `poison ${pid}`), `poison ${fixed.pid}`]);
  }, 90_000);

  it('owners that release the key are not crashes: three crashes with clean 503s between them never poison it', async () => {
    const key = `flaky-${Date.now()}`;
    const crashing = await instances(3, { CRASH: '1' });
    const [flaky] = await instances(1, { FLAKY: '1' });
    const [healthy] = await instances(1);
    // Crash, 503, crash, 503, crash: three owners died, but a clean end came after the first two.
    for (const [index, instance] of crashing.entries()) {
      expect(await retried(instance.url, key, 'flaky')).toBe('connection lost');
      if (index < 2) expect(await retried(flaky.url, key, 'flaky')).toMatchObject({ status: 503 });
    }
    expect(await retried(healthy.url, key, 'flaky')).toMatchObject({ status: 201, body: { ranBy: healthy.pid } });
    expect(runs('flaky')).toHaveLength(6);
  }, 60_000);
});
