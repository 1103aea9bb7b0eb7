import { deepStrictEqual, ok, strictEqual } from 'node:assert/strict';
import { IdempotencyRecord } from '../repository/idempotency.record';
import { ContractContext, sameData } from './contract-context';

/** The contract, part two: failures, leases taken over, renewals, scans, and writes already made. */
export function leaseCases(c: ContractContext): void {
  const { it, response, newKey, claimed } = c;

  it('takes a lease over only once its end is clockSkewSeconds in the past; a finished record once it expired', async () => {
    const at = newKey();
    await claimed(at, 10);
    c.clock.advanceSeconds(12);
    const early = await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 10, clockSkewSeconds: 2 });
    strictEqual(early.claimed, false, 'within the margin, the lease still holds');
    c.clock.advanceSeconds(1);
    const late = await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 10, clockSkewSeconds: 2 });
    strictEqual(late.claimed, true, 'past the lease and the margin, it can be taken over');
    const done = newKey();
    await c.repository.complete({ ...done, claimToken: await claimed(done), response, ttlSeconds: 10 });
    c.clock.advanceSeconds(11);
    const again = await c.repository.claim({ ...done, fingerprint: 'fp', leaseSeconds: 10, clockSkewSeconds: 2 });
    strictEqual(again.claimed, true, 'the margin is for leases: a completed record is claimable once it expired');
  });
  it('makes a FAILED key claimable at once, and fences the failed owner out', async () => {
    const at = newKey();
    const first = await claimed(at);
    sameData(await c.repository.fail({ ...at, claimToken: first, ttlSeconds: 300 }), {
      ok: true,
      expiresAt: c.clock.nowSeconds() + 300,
    });
    const failed = await c.repository.get(at);
    strictEqual(failed?.status, 'FAILED');
    strictEqual(failed?.expiresAt, c.clock.nowSeconds() + 300);

    const retry = await claimed(at);
    ok(retry !== first, 'a new claim gets a new token');
    const late = await c.repository.complete({ ...at, claimToken: first, response, ttlSeconds: 60 });
    ok(!late.ok && late.reason === 'lease_lost', `the failed owner must be fenced out, got ${JSON.stringify(late)}`);
  });

  it('lets a new owner take over an expired lease, and never lets the orphan overwrite it', async () => {
    const at = newKey();
    const orphan = await claimed(at);
    c.clock.advanceSeconds(60);
    strictEqual(
      (await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 })).claimed,
      false,
      'the lease holds until expires_at',
    );
    c.clock.advanceSeconds(1);
    const successor = await claimed(at);

    const orphanWrite = await c.repository.complete({
      ...at,
      claimToken: orphan,
      response: { statusCode: 200, headers: {}, body: 'orphan' },
      ttlSeconds: 3600,
    });
    ok(
      !orphanWrite.ok && orphanWrite.reason === 'lease_lost',
      `the orphan's completion must be refused, got ${JSON.stringify(orphanWrite)}`,
    );
    strictEqual(
      (await c.repository.fail({ ...at, claimToken: orphan, ttlSeconds: 300 })).ok,
      false,
      "the orphan's release must be refused",
    );
    strictEqual((await c.repository.complete({ ...at, claimToken: successor, response, ttlSeconds: 3600 })).ok, true);
    sameData((await c.repository.get(at))?.response, response);
  });

  it("refuses an orphan's write as lease_lost once its successor has released the key, not as its own failure", async () => {
    const at = newKey();
    const orphan = await claimed(at, 10);
    c.clock.advanceSeconds(11);
    const successor = await claimed(at, 10);
    await c.repository.fail({ ...at, claimToken: successor, ttlSeconds: 60 });
    for (const write of [
      await c.repository.complete({ ...at, claimToken: orphan, response, ttlSeconds: 60 }),
      await c.repository.fail({ ...at, claimToken: orphan, ttlSeconds: 60 }),
      await c.repository.renew({ ...at, claimToken: orphan, leaseSeconds: 10 }),
    ]) {
      ok(!write.ok && write.reason === 'lease_lost', `expected lease_lost, got ${JSON.stringify(write)}`);
      strictEqual(write.current?.claimToken, successor);
    }
  });

  it('releases a stuck lease (leaseEndedBefore) only if it ended: one renewed since the sweep read it is kept', async () => {
    const at = newKey();
    const owner = await claimed(at, 10);
    c.clock.advanceSeconds(13);
    const cutoff = c.clock.nowSeconds() - 2; // the sweep's read: the lease ended 3 s ago, past a 2 s margin
    await c.repository.renew({ ...at, claimToken: owner, leaseSeconds: 10 }); // then the owner's heartbeat landed
    const stale = await c.repository.fail({ ...at, claimToken: owner, ttlSeconds: 60, leaseEndedBefore: cutoff });
    ok(!stale.ok && stale.reason === 'lease_running', `a renewed lease must be kept, got ${JSON.stringify(stale)}`);
    strictEqual((await c.repository.get(at))?.status, 'PENDING');
    c.clock.advanceSeconds(13);
    const ended = c.clock.nowSeconds() - 2;
    strictEqual(
      (await c.repository.fail({ ...at, claimToken: owner, ttlSeconds: 60, leaseEndedBefore: ended })).ok,
      true,
    );
    strictEqual((await c.repository.get(at))?.status, 'FAILED');
  });

  it('scans every record once, a page of at most pageSize at a time, without the stored responses', async () => {
    const keys = [newKey(), newKey(), newKey(), newKey(), newKey()];
    for (const at of keys)
      await c.repository.complete({ ...at, claimToken: await claimed(at), response, ttlSeconds: 60 });
    const pages: IdempotencyRecord[][] = [];
    for await (const page of c.repository.scan({ pageSize: 2 })) pages.push(page);
    const scanned = pages.flat();
    deepStrictEqual(scanned.map((record) => record.key).sort(), keys.map((at) => at.key).sort());
    ok(
      pages.length >= 3 && pages.every((page) => page.length <= 2),
      `pages of at most 2, got ${pages.map((page) => page.length)}`,
    );
    for (const record of scanned) {
      strictEqual(record.status, 'COMPLETED');
      strictEqual(record.response, undefined, 'a scan carries state, not payloads');
    }
  });

  it('renews the lease for its owner only, and refuses it once the owner is taken over', async () => {
    const at = newKey();
    const owner = await claimed(at, 10);
    c.clock.advanceSeconds(8);
    sameData(await c.repository.renew({ ...at, claimToken: owner, leaseSeconds: 10 }), {
      ok: true,
      expiresAt: c.clock.nowSeconds() + 10,
    });
    c.clock.advanceSeconds(8); // past the first lease, within the renewed one
    strictEqual(
      (await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 10 })).claimed,
      false,
      'the renewed lease holds',
    );
    const stranger = await c.repository.renew({ ...at, claimToken: 'someone-else', leaseSeconds: 10 });
    ok(
      !stranger.ok && stranger.reason === 'lease_lost',
      `another token must not renew, got ${JSON.stringify(stranger)}`,
    );

    c.clock.advanceSeconds(11); // the owner stopped renewing (paused): a successor takes over
    const successor = await claimed(at, 10);
    const late = await c.repository.renew({ ...at, claimToken: owner, leaseSeconds: 10 });
    ok(!late.ok && late.reason === 'lease_lost', `the paused owner must not renew, got ${JSON.stringify(late)}`);
    strictEqual(late.current?.claimToken, successor);
  });

  it('explains a write that this same claim had already made: already_completed, already_failed', async () => {
    const done = newKey();
    const completing = await claimed(done, 10);
    await c.repository.complete({ ...done, claimToken: completing, response, ttlSeconds: 60 });
    for (const again of [
      await c.repository.complete({ ...done, claimToken: completing, response, ttlSeconds: 60 }),
      await c.repository.renew({ ...done, claimToken: completing, leaseSeconds: 10 }),
    ]) {
      ok(!again.ok && again.reason === 'already_completed', `expected already_completed, got ${JSON.stringify(again)}`);
    }
    const failed = newKey();
    const failing = await claimed(failed, 10);
    await c.repository.fail({ ...failed, claimToken: failing, ttlSeconds: 60 });
    const again = await c.repository.fail({ ...failed, claimToken: failing, ttlSeconds: 60 });
    ok(!again.ok && again.reason === 'already_failed', `a retried release is benign, got ${JSON.stringify(again)}`);
  });

  if (c.networked) {
    it('recognises a retried claim whose first attempt landed (its answer lost) as its own: claimed, not a duplicate', async () => {
      ok(c.loseNextClaimAnswer, "a c.networked store's factory must return { repository, c.loseNextClaimAnswer }");
      const at = newKey();
      c.loseNextClaimAnswer();
      const claim = await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 });
      ok(claim.claimed, `the caller's own landed claim must count as won, got ${JSON.stringify(claim)}`);
      strictEqual((await c.repository.get(at))?.claimToken, claim.claimToken);
    });
  }
}
