import { ok, strictEqual } from 'node:assert/strict';
import { StoredResponse } from '../repository/idempotency.record';
import { ContractContext, sameData } from './contract-context';

/** The contract, part one: claims, completions and what a store keeps. */
export function claimCases(c: ContractContext): void {
  const { it, response, newKey, claimed, lost } = c;
  it('claims a new key as PENDING with a lease, fingerprint and claim token', async () => {
    const at = newKey();
    const claimToken = await claimed(at);
    strictEqual(typeof claimToken, 'string');
    const now = c.clock.nowSeconds();
    // Steps and the run count are the steps part's to check, the owners the poison part's (a store may leave them out).
    const read = await c.repository.get(at);
    ok(read, 'the claimed record must be read back');
    const { steps: _steps, runs: _runs, owners: _owners, ...record } = read;
    sameData(
      { partition: at.partition, ...record, completedAt: record?.completedAt, response: record?.response },
      {
        ...at,
        status: 'PENDING',
        expiresAt: now + 60,
        claimToken,
        fingerprint: 'fp',
        pendingSince: now,
        completedAt: undefined,
        response: undefined,
      },
    );
  });

  it('lets the first writer win and hands the record to the loser', async () => {
    const at = newKey();
    const claimToken = await claimed(at);
    const existing = lost(await c.repository.claim({ ...at, fingerprint: 'other', leaseSeconds: 60 }));
    strictEqual(existing.status, 'PENDING');
    strictEqual(existing.fingerprint, 'fp');
    strictEqual(existing.claimToken, claimToken);
  });

  it('has exactly one winner among 32 concurrent claims', async () => {
    const at = newKey();
    const claims = await Promise.all(
      Array.from({ length: 32 }, () => c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 })),
    );
    strictEqual(claims.filter((claim) => claim.claimed).length, 1);
  });

  it('completes for the owner and replays to every later claim until the retention ends', async () => {
    const at = newKey();
    const claimToken = await claimed(at);
    sameData(await c.repository.complete({ ...at, claimToken, response, ttlSeconds: 3600 }), {
      ok: true,
      expiresAt: c.clock.nowSeconds() + 3600,
    });
    const existing = lost(await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 }));
    strictEqual(existing.status, 'COMPLETED');
    sameData(existing.response, response);
    strictEqual(existing.expiresAt, c.clock.nowSeconds() + 3600);
    strictEqual(existing.completedAt, c.clock.nowSeconds());

    c.clock.advanceSeconds(3600);
    strictEqual(
      (await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 })).claimed,
      false,
      'retained until expires_at',
    );
    c.clock.advanceSeconds(1);
    strictEqual(
      (await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 })).claimed,
      true,
      'claimable once expires_at has passed',
    );
  });

  it('keeps what it stored: neither the response given to complete nor a record read back is shared with the caller', async () => {
    const at = newKey();
    const claimToken = await claimed(at);
    const given: StoredResponse = structuredClone(response);
    await c.repository.complete({ ...at, claimToken, response: given, ttlSeconds: 3600 });
    (given.body as { id: string }).id = 'changed after complete';
    const first = lost(await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 }));
    (first.response!.body as { id: string }).id = 'changed by a reader';
    first.status = 'FAILED';
    const again = await c.repository.get(at);
    strictEqual(again?.status, 'COMPLETED');
    sameData(again?.response, response);
  });

  it('refuses a completion with another claim token and leaves the record alone', async () => {
    const at = newKey();
    await claimed(at);
    const before = await c.repository.get(at);
    const result = await c.repository.complete({ ...at, claimToken: 'not-mine', response, ttlSeconds: 3600 });
    ok(!result.ok && result.reason === 'lease_lost', `expected lease_lost, got ${JSON.stringify(result)}`);
    strictEqual(result.current?.status, 'PENDING');
    sameData(await c.repository.get(at), before);
  });

  it('reports a repeated completion by the same claim as already completed, and keeps the first response', async () => {
    const at = newKey();
    const claimToken = await claimed(at);
    await c.repository.complete({ ...at, claimToken, response, ttlSeconds: 3600 });
    const again = await c.repository.complete({
      ...at,
      claimToken,
      response: { statusCode: 500, headers: {} },
      ttlSeconds: 3600,
    });
    ok(!again.ok && again.reason === 'already_completed', `expected already_completed, got ${JSON.stringify(again)}`);
    sameData((await c.repository.get(at))?.response, response);
  });

  it('round-trips every kind of body: none, null, strings, arrays, zero, binary', async () => {
    const bodies: StoredResponse[] = [
      { statusCode: 204, headers: {} },
      { statusCode: 200, headers: {}, body: null },
      { statusCode: 200, headers: {}, body: '' },
      { statusCode: 202, headers: {}, body: 'accepted' },
      { statusCode: 200, headers: {}, body: [] },
      { statusCode: 200, headers: {}, body: 0 },
      { statusCode: 200, headers: {}, body: false },
      { statusCode: 200, headers: {}, bodyBase64: Buffer.from([0, 1, 2, 255]).toString('base64') },
    ];
    for (const stored of bodies) {
      const at = newKey();
      await c.repository.complete({ ...at, claimToken: await claimed(at), response: stored, ttlSeconds: 60 });
      sameData((await c.repository.get(at))?.response, stored);
    }
  });

  it('returns undefined for a key it has never seen', async () => {
    strictEqual(await c.repository.get(newKey()), undefined);
  });
}
