import { join } from 'node:path';
import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { pastLease, scriptFleet } from '../support/script-fleet';

type Answer = { status: number; body: Record<string, unknown>; retryAfter: string | null } | 'connection lost';

/**
 * A rolling deploy with two versions of a handler in two steps (versions-app.script.ts), each in processes of its own,
 * on dynalite: version 2 renamed the second step. A version 1 process dies between the steps; the client's retry lands on
 * a version 2 process, which refuses to resume version 1's steps (503 version-mismatch, Retry-After), and on a version 1
 * process, which resumes them: the charge is made once and the order shipped once. With `onVersionChange: 'restart'`,
 * version 2 runs every step again (documented: their effects too).
 */
describe('versions of a handler during a rolling deploy (dynalite)', () => {
  const fleet = scriptFleet({
    script: join(__dirname, 'versions-app.script.ts'),
    name: 'versions',
    file: 'EFFECTS_FILE',
    ttl: false,
  });
  const instance = (version: string, extra: Record<string, string> = {}) => fleet.start({ VERSION: version, ...extra });
  const effects = (order: string) =>
    fleet.lines((line) => line.split(' ')[1] === order).map((line) => line.split(' ').slice(0, 3).join(' '));
  const send = (url: string, path: string, key: string, order: string): Promise<Answer> =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ order }),
    }).then(
      async (response) => ({
        status: response.status,
        body: (await response.json()) as Record<string, unknown>,
        retryAfter: response.headers.get('retry-after'),
      }),
      () => 'connection lost' as const,
    );
  /** Sent again while the dead owner's lease runs (409), until another answer. */
  const afterLease = (url: string, path: string, key: string, order: string) =>
    pastLease(() => send(url, path, key, order));
  const unique = (name: string) => `${name}-${Date.now()}`;

  it('version 2 refuses version 1’s steps with 503 version-mismatch; a version 1 process resumes them: one charge, one shipment', async () => {
    const [dying, v1, v2] = await Promise.all([instance('1', { CRASH: 'after-charge' }), instance('1'), instance('2')]);
    const [key, order] = [unique('k'), unique('o')];
    expect(await send(dying.url, '/orders', key, order)).toBe('connection lost');
    await dying.exited;
    const refused = await afterLease(v2.url, '/orders', key, order);
    expect(refused).toMatchObject({
      status: 503,
      retryAfter: '1',
      body: { type: ProblemType.versionMismatch, recordVersion: '1', version: '2' },
    });
    expect(await send(v2.url, '/orders', key, order)).toMatchObject({ status: 503 }); // it stays refused there
    const resumed = await send(v1.url, '/orders', key, order);
    expect(resumed).toMatchObject({ status: 201, body: { charge: `charge-${order}`, answeredBy: `1:${v1.pid}` } });
    expect(effects(order)).toEqual([`charge ${order} 1`, `ship ${order} 1`]);
    // Completed: every version replays it.
    expect(await send(v2.url, '/orders', key, order)).toMatchObject({
      status: 201,
      body: (resumed as { body: object }).body,
    });
  });

  it("with onVersionChange 'restart', version 2 runs every step again (the charge too), as documented", async () => {
    const [dying, v2] = await Promise.all([instance('1', { CRASH: 'after-charge' }), instance('2')]);
    const [key, order] = [unique('k'), unique('o')];
    expect(await send(dying.url, '/orders/restarting', key, order)).toBe('connection lost');
    await dying.exited;
    const answer = await afterLease(v2.url, '/orders/restarting', key, order);
    expect(answer).toMatchObject({ status: 201, body: { answeredBy: `2:${v2.pid}` } });
    expect(effects(order)).toEqual([`charge ${order} 1`, `charge ${order} 2`, `ship ${order} 2`]);
  });
});
