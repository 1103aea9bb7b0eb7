import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { ScriptProcess, startScript } from '../support/script-process';
import { createTableWithKey } from '../support/table';

type Answer = { status: number; body: Record<string, unknown>; retryAfter: string | null } | 'connection lost';

/**
 * A rolling deploy with two versions of a handler in two steps (versions-app.script.ts), each in processes of its own,
 * on dynalite: version 2 renamed the second step. A version 1 process dies between the steps; the client's retry lands on
 * a version 2 process, which refuses to resume version 1's steps (503 version-mismatch, Retry-After), and on a version 1
 * process, which resumes them: the charge is made once and the order shipped once. With `onVersionChange: 'restart'`,
 * version 2 runs every step again (documented: their effects too).
 */
describe('versions of a handler during a rolling deploy (dynalite)', () => {
  let dynamo: Dynalite;
  let folder: string;
  let env: Record<string, string>;
  const started: ScriptProcess[] = [];

  beforeAll(async () => {
    dynamo = await startDynalite();
    folder = mkdtempSync(join(tmpdir(), 'versions-'));
    const tableName = uniqueTableName('versions');
    await createTableWithKey(localClient(dynamo.endpoint), tableName, 'pk');
    env = { DYNAMODB_ENDPOINT: dynamo.endpoint, IDEMPOTENCY_TABLE: tableName, EFFECTS_FILE: join(folder, 'effects') };
  }, 60_000);
  afterAll(async () => {
    await Promise.all(started.map((each) => each.kill()));
    await dynamo.stop();
    rmSync(folder, { recursive: true, force: true });
  });

  const instance = async (version: string, extra: Record<string, string> = {}) => {
    const process_ = await startScript(join(__dirname, 'versions-app.script.ts'), {
      ...env,
      VERSION: version,
      ...extra,
    });
    started.push(process_);
    return { url: (process_.ready as { url: string }).url, pid: process_.child.pid!, exited: process_.exited };
  };
  const effects = (order: string) =>
    readFileSync(env.EFFECTS_FILE, { encoding: 'utf8', flag: 'a+' })
      .split('\n')
      .filter((line) => line.split(' ')[1] === order)
      .map((line) => line.split(' ').slice(0, 3).join(' '));
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
  const afterLease = async (url: string, path: string, key: string, order: string): Promise<Answer> => {
    for (let tries = 0; ; tries++) {
      const answer = await send(url, path, key, order);
      if (answer === 'connection lost' || answer.status !== 409 || tries > 60) return answer;
      await sleep(200);
    }
  };
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
