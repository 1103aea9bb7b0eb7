import { IdempotencyRepository } from './idempotency.repository';

/** A store written by a user that implements only the abstract methods. */
class MinimalRepository extends IdempotencyRepository {
  claim = jest.fn();
  complete = jest.fn();
  fail = jest.fn();
  renew = jest.fn();
  get = jest.fn();
  scan = jest.fn();
}

describe('IdempotencyRepository defaults', () => {
  it('a store that does not say it can commit writes with a completion cannot (commitWith is refused)', async () => {
    await expect(new MinimalRepository().supportsCommitWith()).resolves.toBe(false);
  });

  it('a store with nothing to check at startup is ready', async () => {
    await expect(new MinimalRepository().checkReady()).resolves.toBeUndefined();
  });
});
