import { createHook } from 'node:async_hooks';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  IdempotencyClock,
  IdempotencyInFlightError,
  IdempotencyModule,
  IdempotencyService,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { testClock } from '../support/clock';

/**
 * Single-flight in one process: concurrent calls for a key share one claim, and the flight a call joins is the
 * current owner's. These tests count the claims that reach the repository.
 */
describe('single-flight', () => {
  let context: INestApplicationContext;
  let service: IdempotencyService;
  let clock: ManualClock;
  let claims: jest.SpyInstance;
  let renewals: jest.SpyInstance;

  beforeEach(async () => {
    clock = testClock();
    const repository = new InMemoryIdempotencyRepository(clock);
    claims = jest.spyOn(repository, 'claim');
    renewals = jest.spyOn(repository, 'renew');
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ repository, replayCache: { enabled: false } })],
    })
      .overrideProvider(IdempotencyClock)
      .useValue(clock)
      .compile();
    context = await moduleRef.init();
    service = context.get(IdempotencyService);
  });
  afterEach(() => context.close());

  /** A call whose function runs until `finish()`. */
  const running = (key: string, pendingTtlSeconds = 10) => {
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const result = service.execute({ operation: 'op', key, pendingTtlSeconds }, async () => {
      await done;
      return 'ran';
    });
    return { result, finish };
  };
  const settled = () => new Promise((resolve) => setImmediate(resolve));

  it('sends one claim for concurrent calls with the same key; the others are in flight', async () => {
    const owner = running('k');
    const duplicates = await Promise.allSettled(
      Array.from({ length: 5 }, () => service.execute({ operation: 'op', key: 'k' }, async () => 'twice')),
    );
    expect(
      duplicates.every(
        (outcome) => outcome.status === 'rejected' && outcome.reason instanceof IdempotencyInFlightError,
      ),
    ).toBe(true);
    expect(claims).toHaveBeenCalledTimes(1);
    owner.finish();
    await expect(owner.result).resolves.toBe('ran');
  });

  it("leaves a successor's flight alone when an owner whose lease had passed finishes", async () => {
    const first = running('k');
    await settled();
    // The first owner's lease passes (no renewal yet: its heartbeat runs on real time); a second call takes the key over.
    clock.advanceSeconds(13); // past the 10 s lease and its 2 s clock-skew margin
    const second = running('k');
    await settled();
    expect(claims).toHaveBeenCalledTimes(2);
    first.finish();
    await expect(first.result).resolves.toBe('ran');

    // The second owner still runs: a third call joins its flight (no claim sent) and is told it is in flight.
    await expect(service.execute({ operation: 'op', key: 'k' }, async () => 'third')).rejects.toBeInstanceOf(
      IdempotencyInFlightError,
    );
    expect(claims).toHaveBeenCalledTimes(2);
    second.finish();
    await expect(second.result).resolves.toBe('ran');
  });

  it("moves the local flight's lease end with each renewal, so a later call in the process still joins it", async () => {
    const owner = running('k', 3); // renewed every second of real time
    await settled();
    clock.advanceSeconds(2);
    while (renewals.mock.results.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    await renewals.mock.results[0].value;
    await settled();
    // Past the first lease (3 s), within the renewed one (2 + 3 s): joined, not claimed again.
    clock.advanceSeconds(2);
    await expect(service.execute({ operation: 'op', key: 'k' }, async () => 'second')).rejects.toBeInstanceOf(
      IdempotencyInFlightError,
    );
    expect(claims).toHaveBeenCalledTimes(1);
    owner.finish();
    await expect(owner.result).resolves.toBe('ran');
  });

  it('leaves no timer behind once a call that waited for the local owner is answered (the process can exit)', async () => {
    // The long timers (over a minute: the wait's own) created during this test and still pending at its end. Other
    // code in the process may start short timers meanwhile; they do not count.
    const pending = new Set<number>();
    const timers = createHook({
      init: (id, type, _trigger, resource) => {
        if (type === 'Timeout' && (resource as { _idleTimeout?: number })._idleTimeout! > 60_000) pending.add(id);
      },
      destroy: (id) => void pending.delete(id),
    }).enable();
    try {
      const owner = running('k');
      await settled();
      const waiting = service.execute({ operation: 'op', key: 'k', waitMs: 61_000 }, async () => 'twice');
      await settled();
      owner.finish();
      await expect(owner.result).resolves.toBe('ran');
      await expect(waiting).resolves.toBe('ran');
      await settled();
    } finally {
      timers.disable();
    }
    expect(claims).toHaveBeenCalledTimes(2);
    expect(pending.size).toBe(0);
  });
});
