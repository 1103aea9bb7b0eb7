import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';

/**
 * Where the test clocks of a test process start (so that two app instances agree): a whole second a week ahead of
 * real time. Never in the past, because DynamoDB Local really deletes items whose `expires_at` (TTL) has passed.
 */
export const TEST_START_MS = Math.ceil(Date.now() / 1000) * 1000 + 7 * 86_400_000;

/** The one test clock (`ManualClock`), at the tests' start time, or `aheadMs` later: leases expire without sleeping. */
export function testClock(aheadMs = 0): ManualClock {
  return new ManualClock(TEST_START_MS + aheadMs);
}
