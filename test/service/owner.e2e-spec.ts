import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  IdempotencyInFlightError,
  IdempotencyModule,
  IdempotencyRecord,
  IdempotencyResultNotStoredError,
  IdempotencyService,
  IdempotencyTelemetry,
  InMemoryIdempotencyRepository,
  ProtectedWork,
} from 'nestjs-dynamodb-idempotency';
import { CapturedLogs } from '../support/logs';

/**
 * What the owner of a key does around its work: the lease heartbeat, the completion's retries, `canCommitWith`, a
 * commit whose answer is lost, a waiting duplicate elsewhere, and what it logs when the outcome cannot be written.
 */
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
    logs.start(); // after the module is built: Nest sets its own logger while it builds
  };
  afterEach(() => context.close());

  /** Runs `use` against a second instance of the module on the same repository (another process, as far as it knows). */
  const withSecondInstance = async (use: (other: IdempotencyService) => Promise<void>) => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ repository, replayCache: { enabled: false } })],
    }).compile();
    const other = await moduleRef.init();
    try {
      await use(other.get(IdempotencyService));
    } finally {
      await other.close();
    }
  };

  // What an operator reads when the end of a run cannot be written as planned.
  const logs = new CapturedLogs();
  beforeEach(() => logs.clear());
  afterEach(() => logs.stop());

  /** A record as the store would explain a refusal with it. */
  const record = (status: IdempotencyRecord['status']): IdempotencyRecord => ({
    key: 'k',
    status,
    expiresAt: Math.floor(Date.now() / 1000) + 60,
    claimToken: 'another claim',
    fingerprint: 'fp',
    pendingSince: 1,
  });

  const workFails = async (): Promise<string> => {
    throw new Error('the work failed');
  };

  /** Work given to `run` directly, so that its capture and storeIf can be made to throw. */
  const work = (key: string, overrides: Partial<ProtectedWork<string>> = {}): ProtectedWork<string> => ({
    describe: () => service.call(`test ${key}`, 'fp', {}),
    execute: async () => 'done',
    capture: (result) => ({ statusCode: 200, headers: {}, body: result }),
    replay: (stored) => stored.body as string,
    ...overrides,
  });

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
    const completions = jest
      .spyOn(repository, 'complete')
      .mockRejectedValueOnce(new TypeError('a bug, not a store fault'));
    await expect(service.execute({ operation: 'op', key: newKey() }, async () => 'done')).resolves.toBe('done');
    expect(completions).toHaveBeenCalledTimes(1);
    expect(logs.at('error')).toEqual([
      expect.objectContaining({
        msg: 'completion not stored',
        key: expect.stringMatching(/^fn op#/),
        error: 'TypeError: a bug, not a store fault',
      }),
    ]);
  });

  it('answers canCommitWith false while the store has not said whether it has transactions', async () => {
    // Unanswered at startup and again when the call asks.
    await start((store) => jest.spyOn(store, 'supportsCommitWith').mockRejectedValue(new Error('store unreachable')));
    const seen = await service.execute({ operation: 'op', key: newKey() }, async (claim) => claim.canCommitWith);
    expect(seen).toBe(false);
  });

  it('logs a release it could not store, and the caller still gets the error of its work', async () => {
    await start();
    jest.spyOn(repository, 'fail').mockRejectedValueOnce(new TypeError('release broke'));
    await expect(service.execute({ operation: 'op', key: newKey() }, workFails)).rejects.toThrow('the work failed');
    expect(logs.at('error')).toEqual([
      expect.objectContaining({
        msg: 'release not stored; the key unlocks when its lease ends',
        error: 'TypeError: release broke',
      }),
    ]);
  });

  it('warns of a release refused because the lease was lost, and not of one already made', async () => {
    await start();
    const fail = jest.spyOn(repository, 'fail');
    fail.mockResolvedValueOnce({ ok: false, reason: 'lease_lost', current: record('PENDING') });
    await expect(service.execute({ operation: 'op', key: newKey() }, workFails)).rejects.toThrow('the work failed');
    expect(logs.at('warn')).toEqual([expect.objectContaining({ msg: 'release refused', reason: 'lease_lost' })]);

    logs.clear();
    fail.mockResolvedValueOnce({ ok: false, reason: 'already_failed', current: record('FAILED') });
    await expect(service.execute({ operation: 'op', key: newKey() }, workFails)).rejects.toThrow('the work failed');
    expect(logs.at('warn')).toEqual([]);
  });

  it('warns of a completion refused because another claim completed the key, with what the store holds', async () => {
    await start();
    jest
      .spyOn(repository, 'complete')
      .mockResolvedValueOnce({ ok: false, reason: 'lease_lost', current: record('COMPLETED') });
    await expect(service.execute({ operation: 'op', key: newKey() }, async () => 'done')).resolves.toBe('done');
    expect(logs.at('warn')).toEqual([
      expect.objectContaining({
        msg: 'completion refused',
        reason: 'lease_lost',
        current_status: 'COMPLETED',
        pending_since: 1,
      }),
    ]);
  });

  it.each([
    ['already_completed', 'COMPLETED', { raced: 1, reexecuted: 0, outcome: 'executed' }],
    ['lease_lost', 'PENDING', { raced: 0, reexecuted: 0, outcome: 'lease_lost' }],
    ['lease_lost', 'COMPLETED', { raced: 0, reexecuted: 1, outcome: 'lease_lost' }],
  ] as const)(
    'counts a completion refused as %s (the record %s) by that reason only',
    async (reason, status, expected) => {
      await start();
      const telemetry = context.get(IdempotencyTelemetry);
      const [raced, reexecuted, requests] = [
        jest.spyOn(telemetry, 'completionRaced'),
        jest.spyOn(telemetry, 'reexecutionDetected'),
        jest.spyOn(telemetry, 'request'),
      ];
      jest.spyOn(repository, 'complete').mockResolvedValueOnce({ ok: false, reason, current: record(status) });
      await expect(service.execute({ operation: 'op', key: newKey() }, async () => 'done')).resolves.toBe('done');
      expect(raced).toHaveBeenCalledTimes(expected.raced);
      expect(reexecuted).toHaveBeenCalledTimes(expected.reexecuted);
      expect(requests.mock.calls.map(([outcome]) => outcome)).toEqual([expected.outcome]);
    },
  );

  it('records a result whose capture throws as done without a body, and says so', async () => {
    await start();
    const key = newKey();
    const capturing = work(key, {
      capture: () => {
        throw new Error('cannot serialize');
      },
    });
    await expect(service.run(capturing)).resolves.toBe('done');
    expect(logs.at('error')).toEqual([
      expect.objectContaining({ msg: 'capturing the result failed', error: 'Error: cannot serialize' }),
    ]);
    expect(logs.at('warn')).toEqual([
      expect.objectContaining({ msg: expect.stringContaining('recorded as done without a body') }),
    ]);
    await expect(service.run(work(key))).rejects.toBeInstanceOf(IdempotencyResultNotStoredError);
  });

  it('reads a storeIf that throws as its default, and says so: a result is stored, an error is not', async () => {
    await start();
    const throwingStoreIf = () => {
      throw new Error('storeIf broke');
    };
    const stored = newKey();
    await expect(service.run(work(stored, { isFinal: throwingStoreIf }))).resolves.toBe('done');
    expect((await repository.get({ key: `test ${stored}` }))?.status).toBe('COMPLETED');

    const released = newKey();
    const failing = work(released, {
      isFinal: throwingStoreIf,
      captureError: () => ({ statusCode: 409, headers: {}, body: 'conflict' }),
      execute: workFails,
    });
    await expect(service.run(failing)).rejects.toThrow('the work failed');
    expect((await repository.get({ key: `test ${released}` }))?.status).toBe('FAILED');
    expect(logs.at('error')).toEqual([
      expect.objectContaining({
        msg: 'storeIf threw; the outcome is stored',
        key: `test ${stored}`,
        error: 'Error: storeIf broke',
      }),
      expect.objectContaining({
        msg: 'storeIf threw; the outcome is not stored',
        key: `test ${released}`,
        error: 'Error: storeIf broke',
      }),
    ]);
  });

  it('releases the key when capturing an error throws, and says so', async () => {
    await start();
    const key = newKey();
    const failing = work(key, {
      captureError: () => {
        throw new Error('capture broke');
      },
      isFinal: () => true,
      execute: workFails,
    });
    await expect(service.run(failing)).rejects.toThrow('the work failed');
    expect((await repository.get({ key: `test ${key}` }))?.status).toBe('FAILED');
    expect(logs.at('error')).toEqual([
      expect.objectContaining({
        msg: 'capturing the error failed; the key is released',
        error: 'Error: capture broke',
      }),
    ]);
  });

  it('lets a duplicate waiting in another instance (waitMs) run the work itself once the owner releases the key', async () => {
    await start();
    await withSecondInstance(async (other) => {
      const key = newKey();
      let releaseOwner!: () => void;
      const owner = service.execute(
        { operation: 'op', key },
        () => new Promise<string>((_resolve, reject) => (releaseOwner = () => reject(new Error('the owner failed')))),
      );
      await new Promise((resolve) => setTimeout(resolve, 50)); // the owner has claimed
      const waiting = other.execute({ operation: 'op', key, waitMs: 5_000 }, async () => 'ran in the other instance');
      setTimeout(() => releaseOwner(), 200);
      await expect(owner).rejects.toThrow('the owner failed');
      await expect(waiting).resolves.toBe('ran in the other instance');
    });
  });

  it('polls the store while a duplicate in another instance waits (waitMs): after 25 ms, doubling to 500 ms, to the end', async () => {
    await start();
    await withSecondInstance(async (other) => {
      const key = newKey();
      let finishOwner!: () => void;
      const owner = service.execute(
        { operation: 'op', key },
        () => new Promise<string>((resolve) => (finishOwner = () => resolve('the owner finished'))),
      );
      await new Promise((resolve) => setTimeout(resolve, 50)); // the owner has claimed
      const reads = jest.spyOn(repository, 'get');
      const waiting = other.execute({ operation: 'op', key, waitMs: 1_500 }, async () => 'never');
      await expect(waiting).rejects.toBeInstanceOf(IdempotencyInFlightError);
      // Reads at 25, 75, 175, 375, 775 and 1275 ms, and one as the wait ends: 7 (a timer firing a hair early can add a
      // 1 ms pause and a read; late timers under load, fewer). A growth capped at 500 ms from the start gives at most
      // 5; one that shrinks, hundreds.
      expect(reads.mock.calls.length).toBeGreaterThanOrEqual(6);
      expect(reads.mock.calls.length).toBeLessThanOrEqual(10);
      finishOwner();
      await expect(owner).resolves.toBe('the owner finished');
    });
  });

  it('stores a result with commitWith writes even when storeIf calls it not final: the writes are committed with it', async () => {
    await start();
    const key = newKey();
    const order = { Put: { TableName: 'orders', Item: { id: key } } };
    const withWrites = work(key, {
      execute: async (claim) => {
        claim!.commitWith(order);
        return 'done';
      },
      isFinal: () => false,
    });
    await expect(service.run(withWrites)).resolves.toBe('done');
    expect(repository.commits).toEqual([{ key: `test ${key}`, writes: [order] }]);
    await expect(service.run(work(key, { execute: async () => 'ran again' }))).resolves.toBe('done');
  });

  describe('a commit whose answer is lost', () => {
    const committing = (key: string) =>
      service.execute({ operation: 'op', key }, async (claim) => {
        claim.commitWith({ Put: { TableName: 'orders', Item: { id: key } } });
        return 'done';
      });

    it('hands the result back when the release is refused as already completed: the commit landed', async () => {
      await start();
      jest.spyOn(repository, 'complete').mockRejectedValueOnce(new TypeError('answer lost'));
      jest
        .spyOn(repository, 'fail')
        .mockResolvedValueOnce({ ok: false, reason: 'already_completed', current: record('COMPLETED') });
      await expect(committing(newKey())).resolves.toBe('done');
    });

    it('throws the commit error when the release went through: nothing was committed', async () => {
      await start();
      jest.spyOn(repository, 'complete').mockRejectedValueOnce(new TypeError('answer lost'));
      const key = newKey();
      await expect(committing(key)).rejects.toThrow('answer lost');
      expect(repository.commits).toEqual([]);
    });

    it('throws the commit error when the release is refused for another reason', async () => {
      await start();
      jest.spyOn(repository, 'complete').mockRejectedValueOnce(new TypeError('answer lost'));
      jest
        .spyOn(repository, 'fail')
        .mockResolvedValueOnce({ ok: false, reason: 'lease_lost', current: record('PENDING') });
      await expect(committing(newKey())).rejects.toThrow('answer lost');
    });
  });
});
