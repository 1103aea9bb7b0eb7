import { deepStrictEqual, ok, strictEqual } from 'node:assert/strict';
import { IdempotencyRecord, StoredResponse } from '../repository/idempotency.record';
import { ClaimResult, IdempotencyRepository } from '../repository/idempotency.repository';
import { ManualClock } from './manual-clock';

/** The test runner's functions: Jest's, Vitest's, Mocha's or `node:test`'s. Default: the globals. */
export interface TestFunctions {
  describe(name: string, body: () => void): unknown;
  it(name: string, body: () => Promise<void>): unknown;
  beforeEach(body: () => Promise<void>): unknown;
}

/**
 * What the factory hands the contract: the repository, fresh and empty, reading the given clock; for a store reached
 * over a network (`networked`), also how to lose the answer to its next claim write (the write lands, the caller
 * never hears).
 */
export type ContractSubject = IdempotencyRepository | { repository: IdempotencyRepository; loseNextClaimAnswer: () => void };

/** Options of `describeRepositoryContract`: the runner's functions (default: the globals), and `networked`. */
export interface ContractOptions extends Partial<TestFunctions> {
  /**
   * The store is reached over a network, so an answer can be lost: check that a claim whose first attempt landed
   * counts as won when retried. The factory must then return `{ repository, loseNextClaimAnswer }`.
   */
  networked?: boolean;
}

/**
 * The behaviour every `IdempotencyRepository` must have, as tests in your runner: first writer wins among concurrent
 * claims, complete, fail and renew fenced by the claim token, expired leases taken over, retention, round-tripped
 * responses, the scan in pages and the retried claim whose first attempt landed. The module's own DynamoDB and in-memory repositories
 * pass it.
 *
 * @example
 * ```ts
 * import { describeRepositoryContract } from 'nestjs-dynamodb-idempotency/testing';
 * describeRepositoryContract('Redis', async (clock) => new RedisIdempotencyRepository(await freshRedis(), clock));
 * ```
 */

/**
 * Deep equality of JSON data, whatever realm or class made the objects (a store may hand back copies made by
 * `structuredClone` or a driver): compared as the JSON they are.
 */
function sameData(actual: unknown, expected: unknown, message?: string): void {
  const plain = (value: unknown) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));
  deepStrictEqual(plain(actual), plain(expected), message);
}

export function describeRepositoryContract(
  name: string,
  create: (clock: ManualClock) => Promise<ContractSubject>,
  options: ContractOptions = {},
): void {
  const globals = globalThis as unknown as TestFunctions;
  const { describe = globals.describe, it = globals.it, beforeEach = globals.beforeEach, networked = false } = options;
  describe(`${name} repository contract`, () => {
    let clock: ManualClock;
    let repository: IdempotencyRepository;
    let loseNextClaimAnswer: (() => void) | undefined;
    let keys = 0;
    const newKey = () => `POST /contract#${name}-${process.pid}-${++keys}`;
    const response: StoredResponse = {
      statusCode: 201,
      headers: { location: '/orders/1' },
      body: { id: '1', nested: { list: [1, 'two', null, true] }, text: 'ünïcødé' },
    };
    const claimed = async (key: string, leaseSeconds = 60): Promise<string> => {
      const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds });
      ok(claim.claimed, `the first claim of ${key} must win`);
      return claim.claimToken;
    };
    const lost = (claim: ClaimResult) => {
      ok(!claim.claimed, 'the claim must be lost');
      return claim.existing;
    };

    beforeEach(async () => {
      clock = new ManualClock();
      const subject = await create(clock);
      repository = subject instanceof IdempotencyRepository ? subject : subject.repository;
      loseNextClaimAnswer = subject instanceof IdempotencyRepository ? undefined : subject.loseNextClaimAnswer;
    });

    it('claims a new key as PENDING with a lease, fingerprint and claim token', async () => {
      const key = newKey();
      const claimToken = await claimed(key);
      strictEqual(typeof claimToken, 'string');
      const now = clock.nowSeconds();
      const record = await repository.get({ key });
      sameData(
        { ...record, completedAt: record?.completedAt, response: record?.response },
        { key, status: 'PENDING', expiresAt: now + 60, claimToken, fingerprint: 'fp', pendingSince: now, completedAt: undefined, response: undefined },
      );
    });

    it('lets the first writer win and hands the record to the loser', async () => {
      const key = newKey();
      const claimToken = await claimed(key);
      const existing = lost(await repository.claim({ key, fingerprint: 'other', leaseSeconds: 60 }));
      strictEqual(existing.status, 'PENDING');
      strictEqual(existing.fingerprint, 'fp');
      strictEqual(existing.claimToken, claimToken);
    });

    it('has exactly one winner among 32 concurrent claims', async () => {
      const key = newKey();
      const claims = await Promise.all(Array.from({ length: 32 }, () => repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })));
      strictEqual(claims.filter((claim) => claim.claimed).length, 1);
    });

    it('completes for the owner and replays to every later claim until the retention ends', async () => {
      const key = newKey();
      const claimToken = await claimed(key);
      sameData(await repository.complete({ key, claimToken, response, ttlSeconds: 3600 }), { ok: true, expiresAt: clock.nowSeconds() + 3600 });
      const existing = lost(await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 }));
      strictEqual(existing.status, 'COMPLETED');
      sameData(existing.response, response);
      strictEqual(existing.expiresAt, clock.nowSeconds() + 3600);
      strictEqual(existing.completedAt, clock.nowSeconds());

      clock.advanceSeconds(3600);
      strictEqual((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })).claimed, false, 'retained until expires_at');
      clock.advanceSeconds(1);
      strictEqual((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })).claimed, true, 'claimable once expires_at has passed');
    });

    it('keeps what it stored: neither the response given to complete nor a record read back is shared with the caller', async () => {
      const key = newKey();
      const claimToken = await claimed(key);
      const given: StoredResponse = structuredClone(response);
      await repository.complete({ key, claimToken, response: given, ttlSeconds: 3600 });
      (given.body as { id: string }).id = 'changed after complete';
      const first = lost(await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 }));
      (first.response!.body as { id: string }).id = 'changed by a reader';
      first.status = 'FAILED';
      const again = await repository.get({ key });
      strictEqual(again?.status, 'COMPLETED');
      sameData(again?.response, response);
    });

    it('refuses a completion with another claim token and leaves the record alone', async () => {
      const key = newKey();
      await claimed(key);
      const before = await repository.get({ key });
      const result = await repository.complete({ key, claimToken: 'not-mine', response, ttlSeconds: 3600 });
      ok(!result.ok && result.reason === 'lease_lost', `expected lease_lost, got ${JSON.stringify(result)}`);
      strictEqual(result.current?.status, 'PENDING');
      sameData(await repository.get({ key }), before);
    });

    it('reports a repeated completion by the same claim as already completed, and keeps the first response', async () => {
      const key = newKey();
      const claimToken = await claimed(key);
      await repository.complete({ key, claimToken, response, ttlSeconds: 3600 });
      const again = await repository.complete({ key, claimToken, response: { statusCode: 500, headers: {} }, ttlSeconds: 3600 });
      ok(!again.ok && again.reason === 'already_completed', `expected already_completed, got ${JSON.stringify(again)}`);
      sameData((await repository.get({ key }))?.response, response);
    });

    it('makes a FAILED key claimable at once, and fences the failed owner out', async () => {
      const key = newKey();
      const first = await claimed(key);
      sameData(await repository.fail({ key, claimToken: first, ttlSeconds: 300 }), { ok: true, expiresAt: clock.nowSeconds() + 300 });
      const failed = await repository.get({ key });
      strictEqual(failed?.status, 'FAILED');
      strictEqual(failed?.expiresAt, clock.nowSeconds() + 300);

      const retry = await claimed(key);
      ok(retry !== first, 'a new claim gets a new token');
      const late = await repository.complete({ key, claimToken: first, response, ttlSeconds: 60 });
      ok(!late.ok && late.reason === 'lease_lost', `the failed owner must be fenced out, got ${JSON.stringify(late)}`);
    });

    it('lets a new owner take over an expired lease, and never lets the orphan overwrite it', async () => {
      const key = newKey();
      const orphan = await claimed(key);
      clock.advanceSeconds(60);
      strictEqual((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })).claimed, false, 'the lease holds until expires_at');
      clock.advanceSeconds(1);
      const successor = await claimed(key);

      const orphanWrite = await repository.complete({ key, claimToken: orphan, response: { statusCode: 200, headers: {}, body: 'orphan' }, ttlSeconds: 3600 });
      ok(!orphanWrite.ok && orphanWrite.reason === 'lease_lost', `the orphan's completion must be refused, got ${JSON.stringify(orphanWrite)}`);
      strictEqual((await repository.fail({ key, claimToken: orphan, ttlSeconds: 300 })).ok, false, "the orphan's release must be refused");
      strictEqual((await repository.complete({ key, claimToken: successor, response, ttlSeconds: 3600 })).ok, true);
      sameData((await repository.get({ key }))?.response, response);
    });

    it("refuses an orphan's write as lease_lost once its successor has released the key, not as its own failure", async () => {
      const key = newKey();
      const orphan = await claimed(key, 10);
      clock.advanceSeconds(11);
      const successor = await claimed(key, 10);
      await repository.fail({ key, claimToken: successor, ttlSeconds: 60 });
      for (const write of [
        await repository.complete({ key, claimToken: orphan, response, ttlSeconds: 60 }),
        await repository.fail({ key, claimToken: orphan, ttlSeconds: 60 }),
        await repository.renew({ key, claimToken: orphan, leaseSeconds: 10 }),
      ]) {
        ok(!write.ok && write.reason === 'lease_lost', `expected lease_lost, got ${JSON.stringify(write)}`);
        strictEqual(write.current?.claimToken, successor);
      }
    });

    it('scans every record once, a page of at most pageSize at a time, without the stored responses', async () => {
      const keys = [newKey(), newKey(), newKey(), newKey(), newKey()];
      for (const key of keys) await repository.complete({ key, claimToken: await claimed(key), response, ttlSeconds: 60 });
      const pages: IdempotencyRecord[][] = [];
      for await (const page of repository.scan({ pageSize: 2 })) pages.push(page);
      const scanned = pages.flat();
      deepStrictEqual(scanned.map((record) => record.key).sort(), [...keys].sort());
      ok(pages.length >= 3 && pages.every((page) => page.length <= 2), `pages of at most 2, got ${pages.map((page) => page.length)}`);
      for (const record of scanned) {
        strictEqual(record.status, 'COMPLETED');
        strictEqual(record.response, undefined, 'a scan carries state, not payloads');
      }
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
        const key = newKey();
        await repository.complete({ key, claimToken: await claimed(key), response: stored, ttlSeconds: 60 });
        sameData((await repository.get({ key }))?.response, stored);
      }
    });

    it('renews the lease for its owner only, and refuses it once the owner is taken over', async () => {
      const key = newKey();
      const owner = await claimed(key, 10);
      clock.advanceSeconds(8);
      sameData(await repository.renew({ key, claimToken: owner, leaseSeconds: 10 }), { ok: true, expiresAt: clock.nowSeconds() + 10 });
      clock.advanceSeconds(8); // past the first lease, within the renewed one
      strictEqual((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 10 })).claimed, false, 'the renewed lease holds');
      const stranger = await repository.renew({ key, claimToken: 'someone-else', leaseSeconds: 10 });
      ok(!stranger.ok && stranger.reason === 'lease_lost', `another token must not renew, got ${JSON.stringify(stranger)}`);

      clock.advanceSeconds(11); // the owner stopped renewing (paused): a successor takes over
      const successor = await claimed(key, 10);
      const late = await repository.renew({ key, claimToken: owner, leaseSeconds: 10 });
      ok(!late.ok && late.reason === 'lease_lost', `the paused owner must not renew, got ${JSON.stringify(late)}`);
      strictEqual(late.current?.claimToken, successor);
    });

    it('explains a write that this same claim had already made: already_completed, already_failed', async () => {
      const done = newKey();
      const completing = await claimed(done, 10);
      await repository.complete({ key: done, claimToken: completing, response, ttlSeconds: 60 });
      for (const again of [
        await repository.complete({ key: done, claimToken: completing, response, ttlSeconds: 60 }),
        await repository.renew({ key: done, claimToken: completing, leaseSeconds: 10 }),
      ]) {
        ok(!again.ok && again.reason === 'already_completed', `expected already_completed, got ${JSON.stringify(again)}`);
      }
      const failed = newKey();
      const failing = await claimed(failed, 10);
      await repository.fail({ key: failed, claimToken: failing, ttlSeconds: 60 });
      const again = await repository.fail({ key: failed, claimToken: failing, ttlSeconds: 60 });
      ok(!again.ok && again.reason === 'already_failed', `a retried release is benign, got ${JSON.stringify(again)}`);
    });

    if (networked) {
      it('recognises a retried claim whose first attempt landed (its answer lost) as its own: claimed, not a duplicate', async () => {
        ok(loseNextClaimAnswer, 'a networked store\'s factory must return { repository, loseNextClaimAnswer }');
        const key = newKey();
        loseNextClaimAnswer();
        const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
        ok(claim.claimed, `the caller's own landed claim must count as won, got ${JSON.stringify(claim)}`);
        strictEqual((await repository.get({ key }))?.claimToken, claim.claimToken);
      });
    }

    it('returns undefined for a key it has never seen', async () => {
      strictEqual(await repository.get({ key: newKey() }), undefined);
    });
  });
}
