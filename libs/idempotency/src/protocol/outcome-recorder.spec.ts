import { Logger } from '@nestjs/common';
import {
  IdempotencyCommitRejectedError,
  IdempotencyLeaseLostError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { resolveOptions } from '../options/resolved-options';
import { callPolicy } from '../options/route-settings';
import { CompleteInput, CompleteResult } from '../repository/idempotency.repository';
import { InMemoryIdempotencyRepository } from '../repository/in-memory-idempotency.repository';
import { ManualClock } from '../testing/manual-clock';
import { describeWrite, OutcomeRecorder, retryThroughStoreFaults } from './outcome-recorder';
import { ProtectedCall } from './protected-call';
import { ReplayCache } from './replay-cache';
import { ResponseSealer } from '../response/response-sealing';

/** The in-memory store, with completions that can fail as a store fault a given number of times. */
class FlakyRepository extends InMemoryIdempotencyRepository {
  faults = 0;
  completions = 0;

  override async complete(input: CompleteInput): Promise<CompleteResult> {
    this.completions += 1;
    if (this.faults > 0) {
      this.faults -= 1;
      throw new IdempotencyStoreUnavailableError('complete', 'ECONNRESET');
    }
    return super.complete(input);
  }
}

const stored = { statusCode: 201, headers: {}, body: { id: 1 } };

describe('OutcomeRecorder', () => {
  let clock: ManualClock;
  let repository: FlakyRepository;
  let telemetry: IdempotencyTelemetry;
  let cache: ReplayCache;
  let recorder: OutcomeRecorder;
  const call: ProtectedCall = { recordKey: 'k', fingerprint: 'fp', ...callPolicy({}, resolveOptions({})) };

  beforeEach(() => {
    clock = new ManualClock();
    repository = new FlakyRepository(clock);
    telemetry = new IdempotencyTelemetry();
    cache = new ReplayCache({ maxEntries: 10, maxAgeSeconds: 10, clock });
    recorder = new OutcomeRecorder({ repository, clock, telemetry, cache, failedTtlSeconds: 300 });
  });

  const claimed = async () => {
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    if (!claim.claimed) throw new Error('not claimed');
    return claim.claimToken;
  };

  it('completes a final outcome, keeps it in the replay cache, and counts the call executed', async () => {
    const requests = jest.spyOn(telemetry, 'request');
    await recorder.settle(call, await claimed(), stored);
    expect(await repository.get({ key: 'k' })).toMatchObject({
      status: 'COMPLETED',
      response: stored,
      expiresAt: clock.nowSeconds() + 86_400,
    });
    expect(cache.get('k')).toMatchObject({ fingerprint: 'fp', response: stored });
    expect(requests).toHaveBeenCalledWith('executed', expect.anything(), 201);
  });

  it('releases the key (FAILED, claimable at once) when the outcome is not final', async () => {
    await recorder.settle(call, await claimed(), undefined);
    expect(await repository.get({ key: 'k' })).toMatchObject({ status: 'FAILED', expiresAt: clock.nowSeconds() + 300 });
    expect((await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 })).claimed).toBe(true);
  });

  it('counts a completion refused because another claim took over as lease_lost, and leaves its record alone', async () => {
    const token = await claimed();
    clock.advanceSeconds(61);
    const successor = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    const requests = jest.spyOn(telemetry, 'request');
    const reexecuted = jest.spyOn(telemetry, 'reexecutionDetected');
    await recorder.settle(call, token, stored);
    expect(requests).toHaveBeenCalledWith('lease_lost', expect.anything(), undefined);
    expect(reexecuted).not.toHaveBeenCalled(); // the successor is still running: nothing ran twice yet
    expect(await repository.get({ key: 'k' })).toMatchObject({
      status: 'PENDING',
      claimToken: successor.claimed && successor.claimToken,
    });
    expect(cache.size).toBe(0);
  });

  it('counts a re-execution when the successor had already completed the key', async () => {
    const token = await claimed();
    clock.advanceSeconds(61);
    const successor = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    if (!successor.claimed) throw new Error('not claimed');
    await repository.complete({ key: 'k', claimToken: successor.claimToken, response: stored, ttlSeconds: 60 });
    const reexecuted = jest.spyOn(telemetry, 'reexecutionDetected');
    await recorder.settle(call, token, stored);
    expect(reexecuted).toHaveBeenCalledTimes(1);
  });

  it('retries a completion through a store fault', async () => {
    repository.faults = 1;
    await recorder.settle(call, await claimed(), stored);
    expect(repository.completions).toBe(2);
    expect(await repository.get({ key: 'k' })).toMatchObject({ status: 'COMPLETED' });
  });

  it('settles without a record when the response cannot even be sealed: logged as not stored, the call counted', async () => {
    const sealer = {
      seal: () => {
        throw new Error('no key to seal with');
      },
    } as unknown as ResponseSealer;
    recorder = new OutcomeRecorder({ repository, clock, telemetry, cache, sealer, failedTtlSeconds: 300 });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const requests = jest.spyOn(telemetry, 'request');
    try {
      await expect(recorder.settle(call, await claimed(), stored)).resolves.toBeUndefined();
      expect(errors).toHaveBeenCalledWith({
        msg: 'completion not stored',
        key: 'k',
        error: 'Error: no key to seal with',
      });
    } finally {
      errors.mockRestore();
    }
    expect(requests).toHaveBeenCalledWith('executed', expect.anything(), expect.any(Number));
    expect(repository.completions).toBe(0);
    expect(await repository.get({ key: 'k' })).toMatchObject({ status: 'PENDING' }); // unlocked when its lease ends
  });

  it('backs off between retries: 100 ms, then doubling (real time: the sleeps are not on the clock)', async () => {
    repository.faults = 3;
    const started = performance.now();
    await recorder.settle(call, await claimed(), stored);
    const elapsedMs = performance.now() - started;
    expect(repository.completions).toBe(4);
    // 100 + 200 + 400 ms, with room for a timer that starts from the event loop's cached time: not 100 + 50 + 25 (a
    // pause that shrinks), nor 100 + 1000 + 1000 (each pause at least a second instead of at most).
    expect(elapsedMs).toBeGreaterThanOrEqual(500);
    expect(elapsedMs).toBeLessThan(1_500);
  });

  it('gives up retrying once the next pause would end past its 10 s budget, and throws the fault', async () => {
    const write = jest.fn(async () => {
      throw new IdempotencyStoreUnavailableError('complete', 'ECONNRESET');
    });
    // The time by faults so far: the start (a budget to 10 s), then after each fault. The pause after the third ends
    // at 10 s exactly, within the budget; the one after the fourth (800 ms from 10 s) would not. Keyed by the writes
    // made, not by reads, so that a read by anything else in the process cannot shift the times.
    const times = [0, 5_000, 9_000, 9_600, 10_000];
    const now = jest.spyOn(performance, 'now').mockImplementation(() => times[write.mock.calls.length] ?? 60_000);
    try {
      await expect(retryThroughStoreFaults(write)).rejects.toThrow(IdempotencyStoreUnavailableError);
    } finally {
      now.mockRestore();
    }
    expect(write).toHaveBeenCalledTimes(4);
  });

  it('does not retry an error that is not a store fault: it is thrown at once', async () => {
    const write = jest.fn(async () => {
      throw new TypeError('a bug in the write');
    });
    await expect(retryThroughStoreFaults(write)).rejects.toThrow('a bug in the write');
    expect(write).toHaveBeenCalledTimes(1);
  });

  it('commits the writes with the completion, and hands the result back', async () => {
    const writes = [{ Put: { TableName: 'orders', Item: { id: 'o-1' } } }];
    await expect(recorder.commit(call, await claimed(), stored, writes, 'result')).resolves.toBe('result');
    expect(repository.commits).toEqual([{ key: 'k', writes }]);
  });

  it('answers a commit whose lease was taken over with lease lost (409 in flight), nothing written', async () => {
    const token = await claimed();
    clock.advanceSeconds(61);
    await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    const writes = [{ Put: { TableName: 'orders', Item: { id: 'o-1' } } }];
    await expect(recorder.commit(call, token, stored, writes, 'result')).rejects.toBeInstanceOf(
      IdempotencyLeaseLostError,
    );
    expect(repository.commits).toEqual([]);
  });

  it('releases the key and names the write when one of the writes failed its own condition, warning of nothing', async () => {
    const warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const logs = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const token = await claimed();
    jest.spyOn(repository, 'complete').mockResolvedValueOnce({ ok: false, reason: 'commit_rejected', writeIndex: 1 });
    const writes = [
      { Put: { TableName: 'orders', Item: {} } },
      { Update: { TableName: 'stock', Key: {}, UpdateExpression: 'SET n = n - 1' } },
    ];
    await expect(recorder.commit(call, token, stored, writes, 'result')).rejects.toEqual(
      new IdempotencyCommitRejectedError(1, 'Update on stock'),
    );
    expect(await repository.get({ key: 'k' })).toMatchObject({ status: 'FAILED' });
    // A refused write is the handler's outcome (409 commit-rejected), not a refused completion.
    expect(warnings).not.toHaveBeenCalled();
    // The client learns the index; the log which write, on which table.
    expect(logs).toHaveBeenCalledWith(expect.objectContaining({ writeIndex: 1, write: 'Update on stock' }));
    warnings.mockRestore();
    logs.mockRestore();
  });

  it('counts and warns of the same claim completing twice (a retried completion that had landed)', async () => {
    const warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const raced = jest.spyOn(telemetry, 'completionRaced');
    const reexecuted = jest.spyOn(telemetry, 'reexecutionDetected');
    const token = await claimed();
    await recorder.settle(call, token, stored);
    await recorder.settle(call, token, stored);
    expect(raced).toHaveBeenCalledTimes(1);
    expect(reexecuted).not.toHaveBeenCalled();
    expect(warnings).toHaveBeenCalledWith(
      expect.objectContaining({
        msg: 'completion refused',
        key: 'k',
        reason: 'already_completed',
        current_status: 'COMPLETED',
      }),
    );
    warnings.mockRestore();
  });
});

describe('describeWrite', () => {
  it('names a write by its action and table, as the commit-rejected problem shows it', () => {
    expect(describeWrite({ Put: { TableName: 'orders', Item: { id: 'a' } } })).toBe('Put on orders');
    expect(describeWrite({ ConditionCheck: { Key: { id: 'a' } } } as never)).toBe('ConditionCheck');
    expect(describeWrite(undefined)).toBe('write');
  });
});
