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

  it('a store that cannot remove records says so, naming itself', async () => {
    await expect(new MinimalRepository().remove({ key: 'k', claimToken: 't', status: 'PENDING' })).rejects.toThrow(
      'MinimalRepository cannot remove records',
    );
  });
});

/** Optimistic mode's put on a store without its own: a claim, then the completion. */
describe('IdempotencyRepository.putCompleted (the default: claim, then complete)', () => {
  const input = { key: 'k', fingerprint: 'fp', response: { statusCode: 201, headers: {} }, ttlSeconds: 60 };
  const current = { key: 'k', status: 'COMPLETED', claimToken: 'other' };

  function claimedStore() {
    const repository = new MinimalRepository();
    repository.claim.mockResolvedValue({ claimed: true, claimToken: 't' });
    return repository;
  }

  it('releases the key when a write failed its own condition, and says which', async () => {
    const repository = claimedStore();
    repository.complete.mockResolvedValue({ ok: false, reason: 'commit_rejected', writeIndex: 0 });
    await expect(repository.putCompleted(input)).resolves.toEqual({
      ok: false,
      reason: 'commit_rejected',
      writeIndex: 0,
    });
    expect(repository.fail).toHaveBeenCalledWith({ key: 'k', partition: undefined, claimToken: 't', ttlSeconds: 60 });
  });

  it('answers a refused completion with the record as it is, read when the refusal did not carry it', async () => {
    const repository = claimedStore();
    repository.complete.mockResolvedValueOnce({ ok: false, reason: 'lease_lost', current });
    await expect(repository.putCompleted(input)).resolves.toEqual({ ok: false, reason: 'exists', current });
    expect(repository.get).not.toHaveBeenCalled();
    repository.complete.mockResolvedValueOnce({ ok: false, reason: 'lease_lost' });
    repository.get.mockResolvedValueOnce(current);
    await expect(repository.putCompleted(input)).resolves.toEqual({ ok: false, reason: 'exists', current });
    expect(repository.fail).not.toHaveBeenCalled();
  });

  it('fails loudly when the record vanished between the refusal and the read', async () => {
    const repository = claimedStore();
    repository.complete.mockResolvedValue({ ok: false, reason: 'lease_lost' });
    repository.get.mockResolvedValue(undefined);
    await expect(repository.putCompleted(input)).rejects.toThrow(
      'MinimalRepository: the record of k vanished while it was stored',
    );
  });
});
