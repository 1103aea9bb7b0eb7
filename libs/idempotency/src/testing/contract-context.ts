import { deepStrictEqual, ok } from 'node:assert/strict';
import { IdempotencyRecord, StoredResponse } from '../repository/idempotency.record';
import { ClaimResult, IdempotencyRepository, RecordLocation } from '../repository/idempotency.repository';
import { ManualClock } from './manual-clock';

/** The test runner's functions: Jest's, Vitest's, Mocha's or `node:test`'s. Default: the globals. */
export interface TestFunctions {
  describe(name: string, body: () => void): unknown;
  it(name: string, body: () => Promise<void>): unknown;
  beforeEach(body: () => Promise<void>): unknown;
}

/** What the contract's cases share: the store under test (fresh for each case), its clock, and helpers. */
export interface ContractContext {
  it: TestFunctions['it'];
  readonly repository: IdempotencyRepository;
  readonly clock: ManualClock;
  /** For a networked store: lose the answer to its next claim write. */
  readonly loseNextClaimAnswer?: () => void;
  networked: boolean;
  /** A record location no case has used; keys alternate between two partitions, as a sort-key layout sees them. */
  newKey(): RecordLocation;
  response: StoredResponse;
  /** Claims a new location; its claim token. */
  claimed(at: RecordLocation, leaseSeconds?: number): Promise<string>;
  /** The record a lost claim hands back. */
  lost(claim: ClaimResult): IdempotencyRecord;
}

/**
 * Deep equality of JSON data, whatever realm or class made the objects (a store may hand back copies made by
 * `structuredClone` or a driver): compared as the JSON they are.
 */
export function sameData(actual: unknown, expected: unknown, message?: string): void {
  const plain = (value: unknown) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));
  deepStrictEqual(plain(actual), plain(expected), message);
}

/** A lost claim's record, or an assertion failure. */
export function lostClaim(claim: ClaimResult): IdempotencyRecord {
  ok(!claim.claimed, 'the claim must be lost');
  return claim.existing;
}
