import { ok, strictEqual } from 'node:assert/strict';
import { ContractContext } from './contract-context';

/**
 * The contract, part three: an operator's removal of one record (`IdempotencyAdmin.release` / `purge`), only in the
 * state it was read in, and one partition's records listed on their own.
 */
export function adminCases(c: ContractContext, { partitions }: { partitions: boolean }): void {
  const { it, newKey, claimed, response } = c;

  it('removes a record in the state it was read in; the next claim of its key wins', async () => {
    const at = newKey();
    const claimToken = await claimed(at);
    strictEqual((await c.repository.remove({ ...at, claimToken, status: 'PENDING' })).removed, true);
    strictEqual(await c.repository.get(at), undefined);
    ok((await c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60 })).claimed, 'claimable again');
  });

  it('leaves a record another claim owns now, and hands it back', async () => {
    const at = newKey();
    const stale = await claimed(at, 10);
    c.clock.advanceSeconds(20);
    const successor = await claimed(at);
    const result = await c.repository.remove({ ...at, claimToken: stale, status: 'PENDING' });
    ok(!result.removed, 'a stale claim token removes nothing');
    strictEqual(result.current?.claimToken, successor);
    strictEqual((await c.repository.get(at))?.claimToken, successor);
  });

  it('leaves a record whose status changed since it was read (completed meanwhile)', async () => {
    const at = newKey();
    const claimToken = await claimed(at);
    await c.repository.complete({ ...at, claimToken, response, ttlSeconds: 60 });
    const result = await c.repository.remove({ ...at, claimToken, status: 'PENDING' });
    ok(!result.removed, 'a PENDING read does not remove a COMPLETED record');
    strictEqual(result.current?.status, 'COMPLETED');
    strictEqual((await c.repository.remove({ ...at, claimToken, status: 'COMPLETED' })).removed, true);
  });

  it('says so when the record to remove is gone', async () => {
    const result = await c.repository.remove({ ...newKey(), claimToken: 'gone', status: 'FAILED' });
    ok(!result.removed && result.current === undefined, `expected { removed: false }, got ${JSON.stringify(result)}`);
  });

  if (!partitions) return;
  it("lists one partition's records only, each with its partition", async () => {
    const keys = [newKey(), newKey(), newKey(), newKey()]; // two in each partition
    for (const at of keys) await claimed(at);
    const partition = keys[0].partition!;
    const listed = [];
    for await (const page of c.repository.scan({ pageSize: 1, partition })) listed.push(...page);
    const expected = keys.filter((at) => at.partition === partition).map((at) => at.key);
    const mine = listed.filter((record) => keys.some((at) => at.key === record.key));
    strictEqual(JSON.stringify(mine.map((record) => record.key).sort()), JSON.stringify(expected.sort()));
    ok(
      listed.every((record) => record.partition === partition),
      `every record listed is in ${partition}: ${JSON.stringify(listed.map((record) => record.partition))}`,
    );
  });
}
