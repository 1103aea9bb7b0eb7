import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { callPolicy } from '../options/route-settings';
import { resolveOptions } from '../options/resolved-options';
import { ClaimInput, ClaimResult } from '../repository/idempotency.repository';
import { InMemoryIdempotencyRepository } from '../repository/in-memory-idempotency.repository';
import { ManualClock } from '../testing/manual-clock';
import { ProtectedCall } from './protected-call';
import { localOwner, SingleFlight } from './single-flight';

/** Counts the claims that reach the store, and can hold one open to see who joins it meanwhile. */
class CountingRepository extends InMemoryIdempotencyRepository {
  claims = 0;
  private held?: Promise<void>;
  private open?: () => void;

  hold(): void {
    this.held = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open?.();
    this.held = undefined;
  }

  override async claim(input: ClaimInput): Promise<ClaimResult> {
    this.claims += 1;
    await this.held;
    return super.claim(input);
  }
}

const call = (recordKey: string, fingerprint = 'fp'): ProtectedCall => ({
  recordKey,
  fingerprint,
  ...callPolicy({ pendingTtlSeconds: 10 }, resolveOptions({})),
});

describe('SingleFlight', () => {
  let clock: ManualClock;
  let repository: CountingRepository;
  let flights: SingleFlight;

  beforeEach(() => {
    clock = new ManualClock();
    repository = new CountingRepository(clock);
    flights = new SingleFlight(repository, clock, new IdempotencyTelemetry());
  });

  /** A claim as the protocol reads it: the flight's answer, and whether it joined an owner in this process. */
  const claim = async (protectedCall: ProtectedCall) => {
    const { flight, joined } = flights.take(protectedCall);
    const result = await flight.claim;
    return { claim: result, flight, local: joined && result.claimed };
  };

  it('sends one claim for concurrent requests with a key; the others join it as local', async () => {
    repository.hold();
    const first = claim(call('k'));
    const second = claim(call('k'));
    repository.release();
    const [won, joined] = await Promise.all([first, second]);
    expect(repository.claims).toBe(1);
    expect(won).toMatchObject({ local: false, claim: { claimed: true } });
    expect(joined).toMatchObject({ local: true, claim: { claimed: true } });
    expect(joined.flight).toBe(won.flight);
  });

  it('keeps a won flight until its owner settles it; a later request for the key joins it without a claim', async () => {
    const won = await claim(call('k'));
    const joined = await claim(call('k'));
    expect(repository.claims).toBe(1);
    expect(joined.local).toBe(true);
    let settled = false;
    void won.flight.settled().then(() => (settled = true));
    flights.forget('k', won.flight);
    await Promise.resolve();
    expect(settled).toBe(true);
    await claim(call('k')); // the flight is over: this one asks the store (and loses to the PENDING record)
    expect(repository.claims).toBe(2);
  });

  it('forgets a lost claim at once: the next request asks the store again', async () => {
    await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 }); // another process owns it
    const lost = await claim(call('k'));
    expect(lost).toMatchObject({ local: false, claim: { claimed: false } });
    await claim(call('k'));
    expect(repository.claims).toBe(3);
  });

  it('claims in the store again when the local owner’s lease has passed, and leaves the successor’s flight alone', async () => {
    const first = await claim(call('k'));
    clock.advanceSeconds(20); // past the 10 s lease and its 2 s clock-skew margin
    const second = await claim(call('k'));
    expect(second).toMatchObject({ local: false, claim: { claimed: true } });
    flights.forget('k', first.flight); // the first owner finishes late
    expect((await claim(call('k'))).local).toBe(true); // still the successor's flight
  });

  it('forgets a claim the store failed: joiners get the fault, the next request asks the store again', async () => {
    repository.hold();
    const fault = new Error('store unavailable');
    const failing = jest.spyOn(InMemoryIdempotencyRepository.prototype, 'claim').mockRejectedValueOnce(fault);
    const first = claim(call('k'));
    const joined = claim(call('k'));
    repository.release();
    await expect(first).rejects.toBe(fault);
    await expect(joined).rejects.toBe(fault);
    expect(await claim(call('k'))).toMatchObject({ local: false, claim: { claimed: true } });
    expect(repository.claims).toBe(2);
    failing.mockRestore();
  });

  it('describes a local owner as a PENDING record with the flight’s lease', async () => {
    const won = await claim(call('k', 'the-fingerprint'));
    const record = localOwner(call('k'), won.flight, 'token');
    expect(record).toEqual({
      key: 'k',
      status: 'PENDING',
      expiresAt: clock.nowSeconds() + 10,
      claimToken: 'token',
      fingerprint: 'the-fingerprint',
      pendingSince: clock.nowSeconds(),
    });
  });
});
