import { ok } from 'node:assert/strict';
import { recordKey } from '../keys/record-key';
import { IdempotencyRepository, RecordLocation } from '../repository/idempotency.repository';
import { adminCases } from './contract-admin';
import { claimCases } from './contract-claims';
import { ContractContext, lostClaim, TestFunctions } from './contract-context';
import { leaseCases } from './contract-leases';
import { optimisticCases } from './contract-optimistic';
import { poisonCases } from './contract-poison';
import { startedStepCases } from './contract-started-steps';
import { stepCases } from './contract-steps';
import { versionCases } from './contract-versions';
import { ManualClock } from './manual-clock';

export type { TestFunctions } from './contract-context';

/**
 * What the factory hands the contract: the repository, fresh and empty, reading the given clock; for a store reached
 * over a network (`networked`), also how to lose the answer to its next claim write (the write lands, the caller
 * never hears).
 */
export type ContractSubject =
  IdempotencyRepository | { repository: IdempotencyRepository; loseNextClaimAnswer: () => void };

/** Options of `describeRepositoryContract`: the runner's functions (default: the globals), and `networked`. */
export interface ContractOptions extends Partial<TestFunctions> {
  /**
   * The store is reached over a network, so an answer can be lost: check that a claim whose first attempt landed
   * counts as won when retried. The factory must then return `{ repository, loseNextClaimAnswer }`.
   */
  networked?: boolean;
  /**
   * The store lists one partition's records (`scan({ partition })`): a DynamoDB table with a sort key, or a store that
   * keeps the partition. Default true.
   */
  partitions?: boolean;
  /** The store removes records (`remove`, the admin's release and purge). Default true. */
  removes?: boolean;
  /** The store records steps (`recordStep`, `startStep`: `IdempotencyContext.step`). Default true. */
  steps?: boolean;
  /**
   * The store keeps the owners since a record's last clean end and hands them to a claim that takes a lease over
   * (`ClaimResult.takenOver`: poison keys). Default true; without it, keys are never poisoned on this store.
   */
  owners?: boolean;
  /**
   * The store writes a claim's version and refuses, restarts or resumes a record whose steps another version wrote
   * (`ClaimInput.version`, `onVersionChange`). Default true (with `steps`).
   */
  versions?: boolean;
}

/**
 * The behaviour every `IdempotencyRepository` must have, as tests in your runner: first writer wins among concurrent
 * claims, complete, fail and renew fenced by the claim token, optimistic mode's one-write put, expired leases taken over, retention, round-tripped
 * responses, the scan in pages, the retried claim whose first attempt landed, an operator's removal of one record, the
 * steps (recovery points) a resumed claim hands back, the starts of at-most-once steps, versions, and poison keys (final failures, the owners a takeover learns). The module's own DynamoDB and in-memory repositories
 * pass it.
 *
 * @example
 * ```ts
 * import { describeRepositoryContract } from 'nestjs-dynamodb-idempotency/testing';
 * describeRepositoryContract('Redis', async (clock) => new RedisIdempotencyRepository(await freshRedis(), clock));
 * ```
 */
export function describeRepositoryContract(
  name: string,
  create: (clock: ManualClock) => Promise<ContractSubject>,
  options: ContractOptions = {},
): void {
  const globals = globalThis as unknown as TestFunctions;
  const { describe = globals.describe, it = globals.it, beforeEach = globals.beforeEach } = options;
  const {
    networked = false,
    partitions = true,
    removes = true,
    steps = true,
    owners = true,
    versions = true,
  } = options;
  describe(`${name} repository contract`, () => {
    let subject: { repository: IdempotencyRepository; clock: ManualClock; loseNextClaimAnswer?: () => void };
    let keys = 0;
    const context: ContractContext = {
      it,
      networked,
      get repository() {
        return subject.repository;
      },
      get clock() {
        return subject.clock;
      },
      get loseNextClaimAnswer() {
        return subject.loseNextClaimAnswer;
      },
      newKey: (): RecordLocation => {
        keys += 1;
        // A record key as the module writes them (an operation, `#`, a SHA-256): listings keep only those.
        const key = recordKey('POST /contract', `${name}-${process.pid}`, String(keys));
        return { key, partition: `contract-tenant-${keys % 2}` };
      },
      response: {
        statusCode: 201,
        headers: { location: '/orders/1' },
        body: { id: '1', nested: { list: [1, 'two', null, true] }, text: 'ünïcødé' },
      },
      claimed: async (at, leaseSeconds = 60) => {
        const claim = await subject.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds });
        ok(claim.claimed, `the first claim of ${at.key} must win`);
        return claim.claimToken;
      },
      lost: lostClaim,
    };

    beforeEach(async () => {
      const clock = new ManualClock();
      const made = await create(clock);
      subject =
        made instanceof IdempotencyRepository
          ? { repository: made, clock }
          : { repository: made.repository, clock, loseNextClaimAnswer: made.loseNextClaimAnswer };
    });

    claimCases(context);
    leaseCases(context);
    optimisticCases(context);
    if (removes) adminCases(context, { partitions });
    if (steps) stepCases(context);
    if (steps) startedStepCases(context);
    if (steps && versions) versionCases(context);
    poisonCases(context, { owners, removes });
  });
}
