import { ManualClock } from '../testing/manual-clock';
import { InMemoryIdempotencyRepository } from './in-memory-idempotency.repository';
import { COMPACT_AFTER } from './in-memory-records';

const response = { statusCode: 200, headers: {} };
/** The repository's private list of finished records in write order, from `oldest` on: the memory two tests are about. */
const writeOrder = (repository: InMemoryIdempotencyRepository) =>
  (repository as unknown as { order: { finished: unknown[]; oldest: number } }).order;

async function completed(repository: InMemoryIdempotencyRepository, key: string, ttlSeconds = 60) {
  const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 30 });
  if (!claim.claimed) throw new Error(`${key} not claimed`);
  await repository.complete({ key, claimToken: claim.claimToken, response, ttlSeconds });
}

describe('InMemoryIdempotencyRepository memory', () => {
  it('evicts finished records past their expiry on later writes, oldest first, and no earlier', async () => {
    const clock = new ManualClock();
    const repository = new InMemoryIdempotencyRepository(clock);
    await completed(repository, 'a', 10);
    await completed(repository, 'b', 10);
    clock.advanceSeconds(10);
    await completed(repository, 'c');
    expect(await repository.get({ key: 'a' })).toBeDefined(); // expires_at is now: not past it yet
    clock.advanceSeconds(1);
    await completed(repository, 'd');
    expect(await repository.get({ key: 'a' })).toBeUndefined();
    expect(await repository.get({ key: 'b' })).toBeUndefined();
    expect(await repository.get({ key: 'c' })).toBeDefined();
    expect(repository.size).toBe(2);
  });

  it('sweeps a bounded number of expired records per write, so no write pays for all of them; later writes go on', async () => {
    const clock = new ManualClock();
    const repository = new InMemoryIdempotencyRepository(clock);
    for (const key of ['a', 'b', 'c', 'd', 'e', 'f']) await completed(repository, key, 10);
    clock.advanceSeconds(11);
    await repository.claim({ key: 'new', fingerprint: 'fp', leaseSeconds: 30 });
    expect(repository.size).toBe(5); // two of the six expired swept, the new one added
    expect(await repository.get({ key: 'a' })).toBeUndefined();
    expect(await repository.get({ key: 'c' })).toBeDefined();
    await repository.claim({ key: 'newer', fingerprint: 'fp', leaseSeconds: 30 });
    expect(repository.size).toBe(4);
  });

  it('never evicts a PENDING record, even past its lease: its owner or a successor writes it', async () => {
    const clock = new ManualClock();
    const repository = new InMemoryIdempotencyRepository(clock);
    await repository.claim({ key: 'running', fingerprint: 'fp', leaseSeconds: 5 });
    clock.advanceSeconds(60);
    await completed(repository, 'other');
    await completed(repository, 'another');
    expect(await repository.get({ key: 'running' })).toMatchObject({ status: 'PENDING' });
  });

  it('keeps at most maxRecords: the oldest finished record goes first, a running one never', async () => {
    const repository = new InMemoryIdempotencyRepository(new ManualClock(), { maxRecords: 3 });
    await repository.claim({ key: 'running', fingerprint: 'fp', leaseSeconds: 60 });
    await completed(repository, 'first');
    await completed(repository, 'second');
    await completed(repository, 'third');
    expect(repository.size).toBe(3);
    expect(await repository.get({ key: 'running' })).toMatchObject({ status: 'PENDING' });
    expect(await repository.get({ key: 'first' })).toBeUndefined();
    expect(await repository.get({ key: 'third' })).toBeDefined();
  });

  it('evicts by the last write, across thousands of writes: a record finished late outlives those finished before', async () => {
    const repository = new InMemoryIdempotencyRepository(new ManualClock(), { maxRecords: 3 });
    const late = await repository.claim({ key: 'late', fingerprint: 'fp', leaseSeconds: 60 });
    if (!late.claimed) throw new Error('late not claimed');
    for (let i = 0; i < 3000; i++) await completed(repository, `key-${i}`);
    await repository.complete({ key: 'late', claimToken: late.claimToken, response, ttlSeconds: 60 });
    await completed(repository, 'extra-0');
    await completed(repository, 'extra-1');
    expect(await repository.get({ key: 'key-2999' })).toBeUndefined();
    expect(await repository.get({ key: 'late' })).toMatchObject({ status: 'COMPLETED' });
    await completed(repository, 'extra-2');
    expect(await repository.get({ key: 'late' })).toBeUndefined();
    expect(repository.size).toBe(3);
  });

  it('evicts a key that failed and was claimed again thousands of times by its last write', async () => {
    const repository = new InMemoryIdempotencyRepository(new ManualClock(), { maxRecords: 2 });
    await completed(repository, 'first');
    for (let i = 0; i < 3000; i++) {
      const claim = await repository.claim({ key: 'flaky', fingerprint: 'fp', leaseSeconds: 60 });
      if (!claim.claimed) throw new Error('flaky not claimed');
      await repository.fail({ key: 'flaky', claimToken: claim.claimToken, ttlSeconds: 60 });
    }
    await completed(repository, 'second');
    expect(await repository.get({ key: 'first' })).toBeUndefined();
    expect(await repository.get({ key: 'flaky' })).toMatchObject({ status: 'FAILED' });
    await completed(repository, 'third');
    expect(await repository.get({ key: 'flaky' })).toBeUndefined();
    expect(await repository.get({ key: 'second' })).toBeDefined();
  });

  it('keeps its list of finished records in write order bounded by the records kept, however often keys are rewritten', async () => {
    const repository = new InMemoryIdempotencyRepository(new ManualClock());
    // The heap itself is checked in test/real-app, in a child process.
    const listed = () => writeOrder(repository).finished.length - writeOrder(repository).oldest;
    await completed(repository, 'first'); // a front that stays: its TTL is long and nothing pushes it out
    let longest = 0;
    for (let i = 0; i < 5000; i++) {
      const claim = await repository.claim({ key: 'flaky', fingerprint: 'fp', leaseSeconds: 60 });
      if (!claim.claimed) throw new Error('flaky not claimed');
      await repository.fail({ key: 'flaky', claimToken: claim.claimToken, ttlSeconds: 60 });
      longest = Math.max(longest, listed());
    }
    expect(repository.size).toBe(2);
    expect(longest).toBeLessThanOrEqual(2 * repository.size + COMPACT_AFTER + 1);
    expect(await repository.get({ key: 'first' })).toBeDefined();
  });

  it('drops the entries of its write-order list that eviction has passed', async () => {
    const repository = new InMemoryIdempotencyRepository(new ManualClock(), { maxRecords: 10 });
    let longest = 0;
    for (let i = 0; i < 10_000; i++) {
      await completed(repository, `key-${i}`);
      longest = Math.max(longest, writeOrder(repository).finished.length);
    }
    expect(repository.size).toBe(10);
    expect(longest).toBeLessThanOrEqual(2 * COMPACT_AFTER + 10 + 2);
  });

  it('evicts the record a key has now, never one written before it: removed, claimed or put again after it failed', async () => {
    const repository = new InMemoryIdempotencyRepository(new ManualClock(), { maxRecords: 4 });
    const failedOnce = async (key: string) => {
      const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
      if (!claim.claimed) throw new Error(`${key} not claimed`);
      await repository.fail({ key, claimToken: claim.claimToken, ttlSeconds: 60 });
    };
    await completed(repository, 'removed');
    const current = await repository.get({ key: 'removed' });
    await repository.remove({ key: 'removed', claimToken: current!.claimToken, status: 'COMPLETED' });
    await failedOnce('retried');
    await failedOnce('put');
    await completed(repository, 'first');
    await completed(repository, 'removed'); // written again, after 'first'
    await completed(repository, 'retried'); // claimed again over its FAILED record
    await repository.putCompleted({ key: 'put', fingerprint: 'fp', response, ttlSeconds: 60 }); // put over its FAILED record
    await completed(repository, 'last'); // past maxRecords: the oldest kept record ('first') goes
    expect(await repository.get({ key: 'first' })).toBeUndefined();
    for (const key of ['removed', 'retried', 'put', 'last'])
      expect(await repository.get({ key })).toMatchObject({ status: 'COMPLETED' });
    expect(repository.size).toBe(4);
  });

  it('hands every claim a token of its own, across stores of one process', async () => {
    const stores = [new InMemoryIdempotencyRepository(), new InMemoryIdempotencyRepository()];
    const tokens = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      for (const store of stores) {
        const claim = await store.claim({ key: `key-${i}`, fingerprint: 'fp', leaseSeconds: 30 });
        if (!claim.claimed) throw new Error('not claimed');
        tokens.add(claim.claimToken);
      }
    }
    expect(tokens.size).toBe(2000);
  });

  it('refuses a maxRecords that is not a positive whole number', () => {
    expect(() => new InMemoryIdempotencyRepository(new ManualClock(), { maxRecords: 0 })).toThrow(
      /maxRecords must be a positive whole number/,
    );
    expect(() => new InMemoryIdempotencyRepository(new ManualClock(), { maxRecords: 1.5 })).toThrow(/maxRecords/);
  });
});

describe('InMemoryIdempotencyRepository partitions and writes', () => {
  const records = async (repository: InMemoryIdempotencyRepository, partition?: string) => {
    const keys: string[] = [];
    for await (const page of repository.scan({ pageSize: 10, partition })) keys.push(...page.map((r) => r.key));
    return keys.sort();
  };

  it("keeps each record's partition, from a claim or an optimistic put, so one partition can be scanned", async () => {
    const repository = new InMemoryIdempotencyRepository(new ManualClock());
    await repository.claim({ key: 'claimed', partition: 'tenant-1', fingerprint: 'fp', leaseSeconds: 30 });
    await repository.putCompleted({ key: 'put', partition: 'tenant-1', fingerprint: 'fp', response, ttlSeconds: 60 });
    await repository.claim({ key: 'elsewhere', partition: 'tenant-2', fingerprint: 'fp', leaseSeconds: 30 });
    await repository.claim({ key: 'unscoped', fingerprint: 'fp', leaseSeconds: 30 });
    expect(await records(repository, 'tenant-1')).toEqual(['claimed', 'put']);
    expect(await records(repository)).toEqual(['claimed', 'elsewhere', 'put', 'unscoped']);
    // A record without a partition has no such field, nor a PENDING one a completion time (a copy handed out carries
    // only the fields it has).
    expect(Object.keys((await repository.get({ key: 'unscoped' }))!)).not.toContain('partition');
    expect(Object.keys((await repository.get({ key: 'unscoped' }))!)).not.toContain('completedAt');
    expect((await repository.get({ key: 'claimed' }))?.partition).toBe('tenant-1');
  });

  it("records an optimistic put's writes as committed with it, a copy of them", async () => {
    const repository = new InMemoryIdempotencyRepository(new ManualClock());
    const writes = [{ Put: { TableName: 'orders', Item: { id: 'o-1' } } }];
    await repository.putCompleted({ key: 'k', fingerprint: 'fp', response, ttlSeconds: 60, writes });
    writes[0].Put.Item.id = 'changed later';
    expect(repository.commits).toEqual([{ key: 'k', writes: [{ Put: { TableName: 'orders', Item: { id: 'o-1' } } }] }]);
  });
});
