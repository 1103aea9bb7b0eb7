import { HttpException } from '@nestjs/common';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { resolveOptions } from '../options/resolved-options';
import { callPolicy } from '../options/route-settings';
import { InMemoryIdempotencyRepository } from '../repository/in-memory-idempotency.repository';
import { storedException } from '../response/stored-exception';
import { replayedBody, storedResult } from '../response/stored-response.codec';
import { ManualClock } from '../testing/manual-clock';
import { IdempotencyContext } from './idempotency-context';
import { KeyOwner } from './key-owner';
import { OutcomeRecorder } from './outcome-recorder';
import { ProtectedCall, ProtectedWork } from './protected-call';
import { ReplayCache } from './replay-cache';
import { Flight, SingleFlight } from './single-flight';

describe('KeyOwner', () => {
  let clock: ManualClock;
  let repository: InMemoryIdempotencyRepository;
  let owner: KeyOwner;
  let flight: Flight;
  let token: string;
  const call: ProtectedCall = { recordKey: 'k', fingerprint: 'fp', ...callPolicy({}, resolveOptions({})) };

  beforeEach(async () => {
    clock = new ManualClock();
    repository = new InMemoryIdempotencyRepository(clock);
    const telemetry = new IdempotencyTelemetry();
    const recorder = new OutcomeRecorder({
      repository,
      clock,
      telemetry,
      cache: new ReplayCache({ maxEntries: 0, maxAgeSeconds: 10, clock }),
      failedTtlSeconds: 300,
    });
    owner = new KeyOwner({ repository, clock, telemetry }, recorder, {
      canCommitWith: async () => true,
      tracked: () => false,
    });
    ({ flight } = new SingleFlight(repository, clock, telemetry).take(call));
    const claimed = await flight.claim;
    if (!claimed.claimed) throw new Error('not claimed');
    token = claimed.claimToken;
  });

  const run = <T>(call: ProtectedCall, claimToken: string, work: ProtectedWork<T>, flight: Flight) =>
    owner.run(call, { claimToken, flight, run: 1, steps: [] }, work);

  const work = <T>(
    execute: (context?: IdempotencyContext) => Promise<T>,
    extra: Partial<ProtectedWork<T>> = {},
  ): ProtectedWork<T> => ({
    describe: () => call,
    execute,
    capture: storedResult,
    captureError: (error) => storedException(error),
    replay: (stored) => replayedBody(stored) as T,
    ...extra,
  });

  it('runs the work with a context bound to its claim, then completes the record with its result', async () => {
    let seen: { recordKey?: string; claimToken?: string } = {};
    const result = await run(
      call,
      token,
      work(async (context) => {
        seen = { recordKey: context?.recordKey, claimToken: context?.claimToken };
        return { id: 7 };
      }),
      flight,
    );
    expect(result).toEqual({ id: 7 });
    expect(seen).toEqual({ recordKey: 'k', claimToken: token });
    expect(await repository.get({ key: 'k' })).toMatchObject({ status: 'COMPLETED', response: { body: { id: 7 } } });
  });

  it('releases the key for an error that is not final, and hands the error back unchanged', async () => {
    const failure = new Error('the work failed');
    await expect(
      run(
        call,
        token,
        work(async () => Promise.reject(failure)),
        flight,
      ),
    ).rejects.toBe(failure);
    expect(await repository.get({ key: 'k' })).toMatchObject({ status: 'FAILED' });
  });

  it('stores an error that storeIf makes final, to be replayed', async () => {
    const declined = new HttpException('declined', 402);
    const final = work(async () => Promise.reject(declined), { isFinal: (stored) => stored.statusCode === 402 });
    await expect(run(call, token, final, flight)).rejects.toBe(declined);
    expect(await repository.get({ key: 'k' })).toMatchObject({
      status: 'COMPLETED',
      response: { statusCode: 402, exception: 'HttpException' },
    });
  });

  it('records a result whose capture throws as done without a body, never released for a re-run', async () => {
    const broken = work(async () => 'done', {
      capture: () => {
        throw new Error('cannot capture');
      },
    });
    await expect(run(call, token, broken, flight)).resolves.toBe('done');
    expect(await repository.get({ key: 'k' })).toMatchObject({ status: 'COMPLETED', response: { bodyOmitted: true } });
  });

  it('commits what the work gave commitWith with the completion, and refuses writes once the work has returned', async () => {
    let context: IdempotencyContext | undefined;
    const write = { Put: { TableName: 'orders', Item: { id: 'o-1' } } };
    await run(
      call,
      token,
      work(async (bound) => {
        context = bound;
        bound!.commitWith(write);
        return 'ordered';
      }),
      flight,
    );
    expect(repository.commits).toEqual([{ key: 'k', writes: [write] }]);
    expect(() => context!.commitWith(write)).toThrow(/already returned/);
  });

  it('leaves no renewal timer behind once the run is over and the armed renewal time has passed', async () => {
    jest.useFakeTimers();
    try {
      let timersWhileRunning = 0;
      await run(
        call,
        token,
        work(async () => {
          timersWhileRunning = jest.getTimerCount();
          return 'done';
        }),
        flight,
      );
      expect(timersWhileRunning).toBe(1); // the lease's renewal
      // Left armed (the next run would arm it again), it fires with nothing due and is not armed again.
      jest.advanceTimersByTime((call.leaseSeconds * 1000) / 3);
      expect(jest.getTimerCount()).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });
});
