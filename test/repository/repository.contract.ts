import { IdempotencyRepository, StoredResponse } from 'nestjs-dynamodb-idempotency';
import { FakeClock } from '../support/fake-clock';

/**
 * The behaviour every IdempotencyRepository must have. Run against each implementation with a fresh,
 * empty store per test and a fake clock the store reads.
 */
export function describeRepositoryContract(
  name: string,
  create: (clock: FakeClock) => Promise<IdempotencyRepository>,
): void {
  describe(`${name} repository contract`, () => {
    let clock: FakeClock;
    let repository: IdempotencyRepository;
    let keys = 0;
    const newKey = () => `POST /contract#${name}-${++keys}`;
    const response: StoredResponse = {
      statusCode: 201,
      headers: { location: '/orders/1' },
      body: { id: '1', nested: { list: [1, 'two', null, true] }, text: 'ünïcødé' },
    };

    beforeEach(async () => {
      clock = new FakeClock();
      repository = await create(clock);
    });

    it('claims a new key as PENDING with a lease, fingerprint and claim token', async () => {
      const key = newKey();
      const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      expect(claim).toEqual({ claimed: true, claimToken: expect.any(String) });
      const now = clock.nowSeconds();
      expect(await repository.get({ key })).toEqual({
        key,
        status: 'PENDING',
        expiresAt: now + 60,
        claimToken: claim.claimed && claim.claimToken,
        fingerprint: 'fp',
        pendingSince: now,
        completedAt: undefined,
        response: undefined,
      });
    });

    it('lets the first writer win and hands the record to the loser', async () => {
      const key = newKey();
      const first = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      const second = await repository.claim({ key, fingerprint: 'other', leaseSeconds: 60 });
      expect(second).toMatchObject({ claimed: false, existing: { status: 'PENDING', fingerprint: 'fp' } });
      expect(!second.claimed && second.existing.claimToken).toBe(first.claimed && first.claimToken);
    });

    it('has exactly one winner among 32 concurrent claims', async () => {
      const key = newKey();
      const claims = await Promise.all(
        Array.from({ length: 32 }, () => repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })),
      );
      expect(claims.filter((claim) => claim.claimed)).toHaveLength(1);
    });

    it('completes for the owner and replays to every later claim until the retention ends', async () => {
      const key = newKey();
      const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      if (!claim.claimed) throw new Error('claim lost');
      expect(await repository.complete({ key, claimToken: claim.claimToken, response, ttlSeconds: 3600 })).toEqual({
        ok: true,
        expiresAt: clock.nowSeconds() + 3600,
      });

      const duplicate = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      expect(duplicate).toMatchObject({
        claimed: false,
        existing: { status: 'COMPLETED', response, expiresAt: clock.nowSeconds() + 3600, completedAt: clock.nowSeconds() },
      });

      clock.advanceSeconds(3600);
      expect((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })).claimed).toBe(false);
      clock.advanceSeconds(1);
      expect((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })).claimed).toBe(true);
    });

    it('refuses a completion with another claim token and leaves the record alone', async () => {
      const key = newKey();
      await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      const before = await repository.get({ key });
      const result = await repository.complete({ key, claimToken: 'not-mine', response, ttlSeconds: 3600 });
      expect(result).toMatchObject({ ok: false, reason: 'lease_lost', current: { status: 'PENDING' } });
      expect(await repository.get({ key })).toEqual(before);
    });

    it('reports a repeated completion by the same claim as already completed', async () => {
      const key = newKey();
      const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      if (!claim.claimed) throw new Error('claim lost');
      await repository.complete({ key, claimToken: claim.claimToken, response, ttlSeconds: 3600 });
      const again = await repository.complete({
        key,
        claimToken: claim.claimToken,
        response: { statusCode: 500, headers: {} },
        ttlSeconds: 3600,
      });
      expect(again).toMatchObject({ ok: false, reason: 'already_completed' });
      expect((await repository.get({ key }))?.response).toEqual(response);
    });

    it('makes a FAILED key claimable at once, and fences the failed owner out', async () => {
      const key = newKey();
      const first = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      if (!first.claimed) throw new Error('claim lost');
      expect(await repository.fail({ key, claimToken: first.claimToken, ttlSeconds: 300 })).toEqual({ ok: true, expiresAt: clock.nowSeconds() + 300 });
      expect(await repository.get({ key })).toMatchObject({ status: 'FAILED', expiresAt: clock.nowSeconds() + 300 });

      const retry = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      if (!retry.claimed) throw new Error('a FAILED key must be claimable');
      expect(retry.claimToken).not.toBe(first.claimToken);
      expect(await repository.complete({ key, claimToken: first.claimToken, response, ttlSeconds: 60 })).toMatchObject({
        ok: false,
        reason: 'lease_lost',
      });
    });

    it('lets a new owner take over an expired lease, and never lets the orphan overwrite it', async () => {
      const key = newKey();
      const orphan = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      if (!orphan.claimed) throw new Error('claim lost');
      clock.advanceSeconds(60);
      expect((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })).claimed).toBe(false);
      clock.advanceSeconds(1);
      const successor = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      if (!successor.claimed) throw new Error('an expired lease must be claimable');

      const orphanWrite = await repository.complete({
        key,
        claimToken: orphan.claimToken,
        response: { statusCode: 200, headers: {}, body: 'orphan' },
        ttlSeconds: 3600,
      });
      expect(orphanWrite).toMatchObject({ ok: false, reason: 'lease_lost' });
      expect(await repository.fail({ key, claimToken: orphan.claimToken, ttlSeconds: 300 })).toMatchObject({ ok: false });
      expect(await repository.complete({ key, claimToken: successor.claimToken, response, ttlSeconds: 3600 })).toMatchObject({ ok: true });
      expect((await repository.get({ key }))?.response).toEqual(response);
    });

    it('round-trips every kind of body: none, null, strings, arrays, binary', async () => {
      const bodies: StoredResponse[] = [
        { statusCode: 204, headers: {} },
        { statusCode: 200, headers: {}, body: null },
        { statusCode: 200, headers: {}, body: '' },
        { statusCode: 202, headers: {}, body: 'accepted' },
        { statusCode: 200, headers: {}, body: [] },
        { statusCode: 200, headers: {}, body: 0 },
        { statusCode: 200, headers: {}, bodyBase64: Buffer.from([0, 1, 2, 255]).toString('base64') },
      ];
      for (const stored of bodies) {
        const key = newKey();
        const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
        if (!claim.claimed) throw new Error('claim lost');
        await repository.complete({ key, claimToken: claim.claimToken, response: stored, ttlSeconds: 60 });
        expect((await repository.get({ key }))?.response).toEqual(stored);
      }
    });

    it('renews the lease for its owner only, and refuses it once the owner is taken over', async () => {
      const key = newKey();
      const owner = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 10 });
      if (!owner.claimed) throw new Error('claim lost');
      clock.advanceSeconds(8);
      expect(await repository.renew({ key, claimToken: owner.claimToken, leaseSeconds: 10 })).toEqual({
        ok: true,
        expiresAt: clock.nowSeconds() + 10,
      });
      clock.advanceSeconds(8); // past the first lease, within the renewed one
      expect(await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 10 })).toMatchObject({ claimed: false });
      expect(await repository.renew({ key, claimToken: 'someone-else', leaseSeconds: 10 })).toMatchObject({ ok: false, reason: 'lease_lost' });

      clock.advanceSeconds(11); // the owner stopped renewing (paused): a successor takes over
      const successor = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 10 });
      expect(successor.claimed).toBe(true);
      expect(await repository.renew({ key, claimToken: owner.claimToken, leaseSeconds: 10 })).toMatchObject({
        ok: false,
        reason: 'lease_lost',
        current: { status: 'PENDING', claimToken: successor.claimed && successor.claimToken },
      });
    });

    it('explains a write that this same claim had already made: already_completed, already_failed', async () => {
      const done = newKey();
      const completing = await repository.claim({ key: done, fingerprint: 'fp', leaseSeconds: 10 });
      if (!completing.claimed) throw new Error('claim lost');
      await repository.complete({ key: done, claimToken: completing.claimToken, response, ttlSeconds: 60 });
      expect(await repository.complete({ key: done, claimToken: completing.claimToken, response, ttlSeconds: 60 })).toMatchObject({
        ok: false,
        reason: 'already_completed',
      });
      expect(await repository.renew({ key: done, claimToken: completing.claimToken, leaseSeconds: 10 })).toMatchObject({
        ok: false,
        reason: 'already_completed',
      });

      const failed = newKey();
      const failing = await repository.claim({ key: failed, fingerprint: 'fp', leaseSeconds: 10 });
      if (!failing.claimed) throw new Error('claim lost');
      await repository.fail({ key: failed, claimToken: failing.claimToken, ttlSeconds: 60 });
      // A retried release whose first attempt landed: benign, not a lost lease.
      expect(await repository.fail({ key: failed, claimToken: failing.claimToken, ttlSeconds: 60 })).toMatchObject({
        ok: false,
        reason: 'already_failed',
      });
    });

    it('returns undefined for a key it has never seen', async () => {
      expect(await repository.get({ key: newKey() })).toBeUndefined();
    });
  });
}
