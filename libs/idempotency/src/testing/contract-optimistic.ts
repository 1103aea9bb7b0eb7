import { ok, strictEqual } from 'node:assert/strict';
import { PutCompletedInput, PutCompletedResult } from '../repository/idempotency.repository';
import { ContractContext, sameData } from './contract-context';

/** The contract, optimistic mode: the COMPLETED record put in one write, first writer wins. */
export function optimisticCases(c: ContractContext): void {
  const { it, response, newKey, claimed } = c;
  const put = (
    input: Omit<PutCompletedInput, 'fingerprint' | 'response' | 'ttlSeconds'> & Partial<PutCompletedInput>,
  ) => c.repository.putCompleted({ fingerprint: 'fp', response, ttlSeconds: 3600, ...input });
  const existing = (result: PutCompletedResult) => {
    ok(!result.ok && result.reason === 'exists', `expected exists, got ${JSON.stringify(result)}`);
    return result.current;
  };

  it('puts a COMPLETED record for a new key, and hands it (with its response) to every later put and claim', async () => {
    const at = newKey();
    sameData(await put(at), { ok: true, expiresAt: c.clock.nowSeconds() + 3600 });
    const record = await c.repository.get(at);
    strictEqual(record?.status, 'COMPLETED');
    strictEqual(record?.fingerprint, 'fp');
    strictEqual(record?.completedAt, c.clock.nowSeconds());
    sameData(record?.response, response);

    const later = existing(await put({ ...at, fingerprint: 'other', response: { statusCode: 500, headers: {} } }));
    strictEqual(later.status, 'COMPLETED');
    strictEqual(later.fingerprint, 'fp');
    sameData(later.response, response);
    const claim = await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 });
    ok(!claim.claimed && claim.existing.status === 'COMPLETED', 'a claim finds the record completed');
  });

  // A store that puts in one write hands every loser the COMPLETED record; the base class's two-write default may
  // hand a loser the winner's claim, still PENDING (the caller then answers 409 in flight).
  it('has exactly one winner among 32 concurrent puts, and every loser gets the winner’s record', async () => {
    const at = newKey();
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        put({ ...at, response: { statusCode: 201, headers: {}, body: { attempt: i } } }),
      ),
    );
    const winners = results.filter((result) => result.ok);
    strictEqual(winners.length, 1);
    const stored = (await c.repository.get(at))?.response;
    for (const result of results.filter((r) => !r.ok)) {
      const current = existing(result);
      if (current.status === 'COMPLETED') sameData(current.response, stored);
      else strictEqual(current.status, 'PENDING');
    }
  });

  it('puts over a FAILED record and a lease past its end by the clock-skew margin, never over a live lease', async () => {
    const failed = newKey();
    const claimToken = await claimed(failed);
    await c.repository.fail({ ...failed, claimToken, ttlSeconds: 60 });
    ok((await put(failed)).ok, 'a FAILED record is replaced');

    const leased = newKey();
    await claimed(leased, 60);
    strictEqual(existing(await put({ ...leased, clockSkewSeconds: 2 })).status, 'PENDING');
    c.clock.advanceSeconds(62);
    strictEqual(existing(await put({ ...leased, clockSkewSeconds: 2 })).status, 'PENDING', 'within the margin');
    c.clock.advanceSeconds(1);
    ok((await put({ ...leased, clockSkewSeconds: 2 })).ok, 'past the lease and the margin');
  });

  it('puts over a COMPLETED record once its retention has ended', async () => {
    const at = newKey();
    await put({ ...at, ttlSeconds: 60 });
    c.clock.advanceSeconds(60);
    existing(await put(at));
    c.clock.advanceSeconds(1);
    ok((await put(at)).ok, 'claimable once expires_at has passed');
  });
}
