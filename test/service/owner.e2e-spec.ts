import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IdempotencyModule, IdempotencyService, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';

/** What the owner of a key does around its work: the lease heartbeat, the completion's retries, `canCommitWith`. */
describe('the owner of a key', () => {
  let context: INestApplicationContext;
  let service: IdempotencyService;
  let repository: InMemoryIdempotencyRepository;
  let calls = 0;
  const newKey = () => `owner-${++calls}`;

  /** The module on a fresh in-memory repository, which `prepare` may change before the application starts. */
  const start = async (prepare: (repository: InMemoryIdempotencyRepository) => void = () => undefined) => {
    repository = new InMemoryIdempotencyRepository();
    prepare(repository);
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ repository, replayCache: { enabled: false } })],
    }).compile();
    context = await moduleRef.init();
    service = context.get(IdempotencyService);
  };
  afterEach(() => context.close());

  it('stops renewing its lease once the outcome is written', async () => {
    await start();
    const renewals = jest.spyOn(repository, 'renew');
    // A 3 s lease is renewed every second while the work runs; this work returns at once.
    await service.execute({ operation: 'op', key: newKey(), pendingTtlSeconds: 3 }, async () => 'done');
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    expect(renewals).not.toHaveBeenCalled();
  });

  it('retries a completion through store faults only: any other error is not retried, and the caller keeps its result', async () => {
    await start();
    const completions = jest.spyOn(repository, 'complete').mockRejectedValueOnce(new TypeError('a bug, not a store fault'));
    await expect(service.execute({ operation: 'op', key: newKey() }, async () => 'done')).resolves.toBe('done');
    expect(completions).toHaveBeenCalledTimes(1);
  });

  it('answers canCommitWith false while the store has not said whether it has transactions', async () => {
    // Unanswered at startup and again when the call asks.
    await start((store) => jest.spyOn(store, 'supportsCommitWith').mockRejectedValue(new Error('store unreachable')));
    const seen = await service.execute({ operation: 'op', key: newKey() }, async (claim) => claim.canCommitWith);
    expect(seen).toBe(false);
  });
});
