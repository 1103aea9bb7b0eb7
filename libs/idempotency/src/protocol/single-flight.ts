import { IdempotencyClock } from '../idempotency.clock';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRecord } from '../repository/idempotency.record';
import { ClaimResult, IdempotencyRepository } from '../repository/idempotency.repository';
import { leaseSecondsAt, ProtectedCall } from './protected-call';

/**
 * One claim in this process, shared by every concurrent request with the same key: only the first calls DynamoDB; the
 * others learn from its answer, and wait for a local owner without polling.
 */
export class Flight {
  private done = false;
  private waiting?: Promise<void>;
  private wake?: () => void;

  constructor(
    readonly claim: Promise<ClaimResult>,
    /** The claiming request's fingerprint, claim time and lease end (epoch seconds), for requests that join it. */
    readonly fingerprint: string,
    readonly claimedAt: number,
    public leaseEndsAt: number,
  ) {}

  /** Resolves once a local owner has completed or released the key (made only for a request that waits). */
  settled(): Promise<void> {
    if (this.done) return Promise.resolve();
    return (this.waiting ??= new Promise<void>((resolve) => (this.wake = resolve)));
  }

  settle(): void {
    this.done = true;
    this.wake?.();
  }
}

/** A claim as single-flight answers it. `local`: joined a claim another request of this process won. */
export interface FlightClaim {
  claim: ClaimResult;
  flight: Flight;
  local: boolean;
}

/**
 * The claims in flight in this process, by record key (single-flight): the first request for a key sends the claim;
 * concurrent ones share its answer. A won claim lasts until its owner settles (`forget`).
 */
export class SingleFlight {
  private readonly flights = new Map<string, Flight>();

  constructor(
    private readonly repository: IdempotencyRepository,
    private readonly clock: IdempotencyClock,
    private readonly telemetry: IdempotencyTelemetry,
  ) {}

  async claim(call: ProtectedCall): Promise<FlightClaim> {
    const joined = this.flights.get(call.recordKey);
    // A local owner whose lease has passed is no reason to wait: claim in DynamoDB like any other process would.
    if (joined && joined.leaseEndsAt >= this.clock.nowSeconds()) {
      const claim = await joined.claim;
      return { claim, flight: joined, local: claim.claimed };
    }

    const now = this.clock.nowSeconds();
    const leaseSeconds = leaseSecondsAt(call, now);
    const claim = this.telemetry.span('dedup.claim', { 'idempotency.key': call.recordKey }, async (span) => {
      const result = await this.repository.claim({
        key: call.recordKey,
        partition: call.partition,
        fingerprint: call.fingerprint,
        leaseSeconds,
        clockSkewSeconds: call.clockSkewSeconds,
      });
      span.setAttribute('dynamo.condition_result', result.claimed ? 'won' : 'lost');
      return result;
    });
    const flight = new Flight(claim, call.fingerprint, now, now + leaseSeconds);
    this.flights.set(call.recordKey, flight);
    let claimed = false;
    try {
      const result = await claim;
      claimed = result.claimed;
      return { claim: result, flight, local: false };
    } finally {
      // A lost or failed claim is over at once; a won one lasts until its owner settles.
      if (!claimed) this.forget(call.recordKey, flight);
    }
  }

  /** Ends a flight: requests waiting on it look again. A successor's flight for the same key is left alone. */
  forget(recordKey: string, flight: Flight): void {
    if (this.flights.get(recordKey) === flight) this.flights.delete(recordKey);
    flight.settle();
  }
}

/** What a request that joined a local owner's claim knows of the record: PENDING, with the owner's lease. */
export function localOwner(call: ProtectedCall, flight: Flight, claimToken: string): IdempotencyRecord {
  return {
    key: call.recordKey,
    ...(call.partition === undefined ? {} : { partition: call.partition }),
    status: 'PENDING',
    expiresAt: flight.leaseEndsAt,
    claimToken,
    fingerprint: flight.fingerprint,
    pendingSince: flight.claimedAt,
  };
}
