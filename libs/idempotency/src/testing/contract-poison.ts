import { deepStrictEqual, ok, strictEqual } from 'node:assert/strict';
import { ContractContext, sameData } from './contract-context';

/** The contract, part six: poison keys (`maxCrashedOwners`): final failures, and the owners a takeover hands back. */
export function poisonCases(c: ContractContext, { owners, removes }: { owners: boolean; removes: boolean }): void {
  const { it, newKey, claimed } = c;
  const problem = { statusCode: 500, headers: {}, body: { type: 'key-poisoned', owners: ['a:1', 'b:2'] } };

  it('keeps a final failure (a poisoned key) as the answer until it expires: not claimable, read with its response', async () => {
    const at = newKey();
    const owner = await claimed(at);
    const failed = await c.repository.fail({ ...at, claimToken: owner, ttlSeconds: 60, response: problem });
    strictEqual(failed.ok, true);
    const blocked = await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 });
    const existing = c.lost(blocked);
    strictEqual(existing.status, 'FAILED');
    sameData(existing.response, problem, 'the problem comes back with the record, for every duplicate');
    c.clock.advanceSeconds(61);
    strictEqual(
      (await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 })).claimed,
      true,
      'once expired, it is claimable again',
    );
  });

  if (owners) {
    it('hands a takeover the owners since the last clean end; an owner’s own release forgets them, a sweep’s keeps them', async () => {
      const at = newKey();
      const claim = (holder: string) => c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 10, holder });
      const first = await claim('a:1');
      ok(first.claimed && first.takenOver === undefined, 'a new key takes nothing over');
      c.clock.advanceSeconds(11);
      const second = await claim('b:2');
      ok(second.claimed);
      deepStrictEqual(second.takenOver, ['a:1'], 'the takeover learns the owner that crashed');
      c.clock.advanceSeconds(11);
      const swept = await c.repository.fail({
        ...at,
        claimToken: second.claimToken,
        ttlSeconds: 60,
        leaseEndedBefore: c.clock.nowSeconds(),
      });
      strictEqual(swept.ok, true);
      const third = await claim('c:3');
      ok(third.claimed && third.takenOver === undefined, 'a claim after a release takes no lease over');
      c.clock.advanceSeconds(11);
      const fourth = await claim('d:4');
      ok(fourth.claimed);
      deepStrictEqual(fourth.takenOver, ['a:1', 'b:2', 'c:3'], 'a sweep’s release keeps the crashed owners');
      await c.repository.fail({ ...at, claimToken: fourth.claimToken, ttlSeconds: 60, endedCleanly: true });
      const fifth = await claim('e:5');
      ok(fifth.claimed);
      c.clock.advanceSeconds(11);
      const sixth = await claim('f:6');
      ok(sixth.claimed);
      deepStrictEqual(sixth.takenOver, ['e:5'], 'an owner’s own release starts the count again');
    });
  }

  if (removes) {
    it('reopens a poisoned record only as it was read, keeping its steps', async () => {
      const at = newKey();
      const owner = await claimed(at);
      await c.repository.fail({ ...at, claimToken: owner, ttlSeconds: 60, response: problem });
      strictEqual((await c.repository.reopen({ ...at, claimToken: 'another' })).removed, false);
      strictEqual((await c.repository.reopen({ ...at, claimToken: owner })).removed, true);
      const reopened = await c.repository.get(at);
      strictEqual(reopened?.status, 'FAILED');
      strictEqual(reopened?.response, undefined);
      strictEqual((await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 })).claimed, true);
    });
  }
}
