import { Logger } from '@nestjs/common';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { LeaseHeartbeat } from './lease-heartbeat';
import { RenewInput, TransitionResult } from '../repository/idempotency.repository';
import { InMemoryIdempotencyRepository } from '../repository/in-memory-idempotency.repository';
import { ManualClock } from '../testing/manual-clock';

/**
 * The heartbeat on Jest's fake timers (they move `setInterval` and `performance.now()` together), against the
 * in-memory repository on a clock moved in step. `renews` can hold a renewal open, to see what happens meanwhile.
 * Its warnings are read from Nest's `Logger`.
 */
class HeldRepository extends InMemoryIdempotencyRepository {
  readonly renews: RenewInput[] = [];
  hold = false;
  fault?: Error;
  private release: Array<() => void> = [];

  override async renew(input: RenewInput): Promise<TransitionResult> {
    this.renews.push(input);
    if (this.fault) throw this.fault;
    if (this.hold) await new Promise<void>((resolve) => this.release.push(resolve));
    return super.renew(input);
  }

  releaseAll(): void {
    for (const resolve of this.release.splice(0)) resolve();
  }
}

describe('LeaseHeartbeat', () => {
  let clock: ManualClock;
  let repository: HeldRepository;
  let telemetry: IdempotencyTelemetry;
  const heartbeats: LeaseHeartbeat[] = [];
  let warnings: jest.SpyInstance;

  beforeEach(() => {
    warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    jest.useFakeTimers();
    clock = new ManualClock();
    repository = new HeldRepository(clock);
    telemetry = new IdempotencyTelemetry();
  });
  afterEach(() => {
    for (const heartbeat of heartbeats.splice(0)) heartbeat.stop();
    jest.useRealTimers();
    warnings.mockRestore();
  });
  const warned = () => warnings.mock.calls.map(([message]) => message);

  /** Moves the timers and the store's clock together, letting every renewal that can finish finish. */
  const advance = async (ms: number) => {
    for (let done = 0; done < ms; done += 100) {
      clock.advanceSeconds(0.1);
      await jest.advanceTimersByTimeAsync(100);
    }
  };

  async function owned(leaseSeconds: number, maxLeaseSeconds = 3600) {
    const key = `POST /heartbeat#${Math.random()}`;
    const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds });
    if (!claim.claimed) throw new Error('claim lost');
    const renewed: number[] = [];
    // Where the heartbeat writes each new lease end (a flight in the module): every write is kept.
    const lease = {
      set leaseEndsAt(expiresAt: number) {
        renewed.push(expiresAt);
      },
      leaseLost: false,
    } as { leaseEndsAt: number; leaseLost: boolean };
    const heartbeat = new LeaseHeartbeat(
      { repository, telemetry, clock },
      { recordKey: key, leaseSeconds, maxLeaseSeconds },
      claim.claimToken,
      lease,
    );
    heartbeats.push(heartbeat);
    return { key, claimToken: claim.claimToken, heartbeat, renewed };
  }

  it('renews every third of the lease with its claim token, and reports each new lease end', async () => {
    const { key, claimToken, renewed } = await owned(3);
    await advance(900);
    expect(repository.renews).toHaveLength(0); // a handler shorter than a third of the lease costs no renewal
    await advance(100);
    expect(repository.renews).toEqual([{ key, claimToken, leaseSeconds: 3 }]);
    await advance(2000);
    expect(repository.renews).toHaveLength(3);
    expect(renewed).toHaveLength(3);
    expect(renewed[2]).toBe(clock.nowSeconds() + 3);
    expect((await repository.get({ key }))?.expiresAt).toBe(clock.nowSeconds() + 3);
  });

  it('cuts each renewal at an invocation deadline (AWS Lambda), and sends none once it has passed', async () => {
    clock = new ManualClock(1_000_000_000_000); // a whole second: the deadline is 2 s from now
    repository = new HeldRepository(clock);
    const key = 'POST /heartbeat#deadline';
    const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 2 });
    if (!claim.claimed) throw new Error('claim lost');
    const { claimToken } = claim;
    const heartbeat = new LeaseHeartbeat(
      { repository, telemetry, clock },
      { recordKey: key, leaseSeconds: 3, maxLeaseSeconds: 3600, deadline: 1_000_000_002 },
      claimToken,
      { leaseEndsAt: 0, leaseLost: false },
    );
    heartbeats.push(heartbeat);
    await advance(3000);
    expect(repository.renews).toEqual([{ key, claimToken, leaseSeconds: 1 }]); // at 1 s; at 2 s none
  });

  it('keeps one renewal in flight at a time: ticks while one is pending send nothing', async () => {
    await owned(3);
    repository.hold = true;
    await advance(3500); // ticks at 1, 2 and 3 s; the first renewal is still pending
    expect(repository.renews).toHaveLength(1);
    repository.releaseAll();
    await advance(1000);
    expect(repository.renews).toHaveLength(2);
  });

  it('after stop() renews nothing more, and a renewal that was in flight reports nothing', async () => {
    const { heartbeat, renewed } = await owned(3);
    repository.hold = true;
    await advance(1000);
    expect(repository.renews).toHaveLength(1);
    heartbeat.stop();
    repository.releaseAll();
    await advance(5000);
    expect(repository.renews).toHaveLength(1);
    expect(renewed).toEqual([]);
  });

  it('stops renewing once maxLeaseSeconds have passed, at that very moment, and says so once', async () => {
    const { key } = await owned(3, 3);
    await advance(3000); // ticks at 1 and 2 s renew; the tick at exactly 3 s is past the limit
    expect(repository.renews).toHaveLength(2);
    await advance(3000);
    expect(repository.renews).toHaveLength(2);
    expect(warned()).toEqual([{ msg: 'handler still running after maxLeaseSeconds: lease no longer renewed', key }]);
  });

  it('a refused renewal (the key was taken over) is counted and logged once and ends the renewals', async () => {
    const refused = jest.spyOn(telemetry, 'leaseRenewalRefused');
    const { key } = await owned(3);
    // The owner's process is paused: the store's time passes its lease while none of its timers fire.
    clock.advanceSeconds(10);
    const successor = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 3 });
    expect(successor.claimed).toBe(true);
    await advance(1000); // it resumes: its next renewal is refused…
    expect(repository.renews).toHaveLength(1);
    expect(refused).toHaveBeenCalledTimes(1);
    await advance(3000); // …and it sends no other
    expect(repository.renews).toHaveLength(1);
    expect((await repository.get({ key }))?.claimToken).toBe(successor.claimed && successor.claimToken);
    expect(warned()).toEqual([
      {
        msg: 'lease renewal refused: another caller took the key over; the running handler will not be recorded',
        key,
        current_status: 'PENDING',
      },
    ]);
  });

  it('a renewal refused because its own outcome landed meanwhile ends the renewals without counting or a warning', async () => {
    const refused = jest.spyOn(telemetry, 'leaseRenewalRefused');
    const { key, claimToken } = await owned(3);
    await repository.complete({ key, claimToken, response: { statusCode: 200, headers: {} }, ttlSeconds: 60 });
    await advance(3000);
    expect(repository.renews).toHaveLength(1);
    expect(refused).not.toHaveBeenCalled();
    expect(warned()).toEqual([]);
  });

  it('a renewal that fails on a store fault is logged and tried again at the next tick', async () => {
    const { key, renewed } = await owned(3);
    repository.fault = new Error('ECONNRESET');
    await advance(2000);
    expect(repository.renews).toHaveLength(2);
    repository.fault = undefined;
    await advance(1000);
    expect(repository.renews).toHaveLength(3);
    expect(renewed).toHaveLength(1);
    const failed = { msg: 'lease renewal failed; retried at the next tick', key, error: 'Error: ECONNRESET' };
    expect(warned()).toEqual([failed, failed]);
  });
});
