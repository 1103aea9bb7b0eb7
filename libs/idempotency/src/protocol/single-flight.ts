import { setImmediate as setImmediatePromise, setTimeout as sleep } from 'node:timers/promises';
import { IdempotencyClock } from '../idempotency.clock';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRecord, RecordedStep, StartedStep } from '../repository/idempotency.record';
import { ClaimResult, IdempotencyRepository } from '../repository/idempotency.repository';
import { claimHolder } from './invocation-deadline';
import { leaseSecondsAt, ProtectedCall } from './protected-call';

/**
 * One claim in this process, shared by every concurrent request with the same key: only the first calls DynamoDB; the
 * others learn from its answer, and wait for a local owner without polling.
 */
export class Flight {
  private done = false;
  /** Set when a renewal or a step's write was refused: another caller holds the key now. */
  leaseLost = false;
  private waiting?: Promise<void>;
  private wake?: () => void;
  /** The confirmation read in progress (`SingleFlight.confirm`), shared by the duplicates that arrive meanwhile. */
  confirming?: Promise<IdempotencyRecord | undefined>;

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

  /** Waits until it has settled, at most `ms`, without leaving a timer behind. */
  async settledWithin(ms: number): Promise<void> {
    const timer = new AbortController();
    await Promise.race([this.settled(), sleep(ms, undefined, { signal: timer.signal }).catch(() => undefined)]);
    timer.abort();
  }

  settle(): void {
    this.done = true;
    this.wake?.();
  }
}

/** The flight a call's claim goes on. `joined`: a claim another request of this process sent first. */
export interface FlightTaken {
  flight: Flight;
  joined: boolean;
}

/** The key, when this request's own claim won it (not one it joined). */
export function wonClaim({ flight, joined }: FlightTaken, claim: ClaimResult): WonClaim | undefined {
  if (!claim.claimed || joined) return undefined;
  const { claimToken, run, steps, startedSteps, takenOver } = claim;
  return { claimToken, flight, run, steps, startedSteps, takenOver };
}

/** A claim this request won: its token, its flight, and (from a store with steps) its run and the steps recorded before. */
export interface WonClaim {
  claimToken: string;
  flight: Flight;
  run?: number;
  steps?: readonly RecordedStep[];
  /** The at-most-once steps an earlier run started and did not record (`ClaimResult`). */
  startedSteps?: readonly StartedStep[];
  /** When it took over a lease: the owners since the record's last clean end, each crashed (`ClaimResult`). */
  takenOver?: readonly string[];
}

/**
 * How long the duplicates of a local owner gather before their shared confirmation read is sent (ms): a burst that
 * arrives over a few event-loop turns costs one read.
 */
export const CONFIRMATION_GATHER_MS = 25;

/** The span outcome of a claim. */
const claimOutcome = (result: ClaimResult) => (result.claimed ? 'won' : 'lost');

/**
 * The claims in flight in this process, by record key (single-flight): the first request for a key sends the claim;
 * concurrent ones share its answer. A won claim lasts until its owner settles (`forget`); a lost or failed one ends
 * as soon as it is answered.
 */
export class SingleFlight {
  private readonly flights = new Map<string, Flight>();

  constructor(
    private readonly repository: IdempotencyRepository,
    private readonly clock: IdempotencyClock,
    private readonly telemetry: IdempotencyTelemetry,
    /** How long duplicates gather before their shared confirmation read (`CONFIRMATION_GATHER_MS`; 0: the next turn). */
    private readonly gatherMs = CONFIRMATION_GATHER_MS,
  ) {}

  /** The flight to await the claim on (`flight.claim`): a running one for this key, or one whose claim is sent now. */
  take(call: ProtectedCall): FlightTaken {
    const joined = this.flights.get(call.recordKey);
    // A local owner whose lease has passed is no reason to wait: claim in DynamoDB like any other process would.
    if (joined && joined.leaseEndsAt >= this.clock.nowSeconds()) return { flight: joined, joined: true };

    const now = this.clock.nowSeconds();
    const leaseSeconds = leaseSecondsAt(call, now);
    const sent = this.telemetry.storeSpan(
      'dedup.claim',
      call.recordKey,
      () =>
        this.repository.claim({
          key: call.recordKey,
          partition: call.partition,
          fingerprint: call.fingerprint,
          leaseSeconds,
          clockSkewSeconds: call.clockSkewSeconds,
          holder: claimHolder(),
          version: call.version,
          onVersionChange: call.onVersionChange,
        }),
      claimOutcome,
    );
    const claim = sent.then(
      (result) => {
        if (!result.claimed) this.forget(call.recordKey, flight);
        return result;
      },
      (error: unknown) => {
        this.forget(call.recordKey, flight);
        throw error;
      },
    );
    const flight = new Flight(claim, call.fingerprint, now, now + leaseSeconds);
    this.flights.set(call.recordKey, flight);
    return { flight, joined: false };
  }

  /**
   * The record of a key a local owner holds, as the store has it, read before a duplicate is told it is in flight: an
   * operator may have released the key meanwhile (`keys:release`), and then the next request must run, not wait for
   * the local lease. The duplicates of a burst share one read: it is sent `gatherMs` after the first of them (25 ms),
   * and every duplicate that arrives before its answer shares it; one that arrives after it was answered reads again,
   * so a 409 never rests on a read older than the duplicate itself. Still this claim's: the local owner's record.
   * Otherwise the flight ends (the owner's completion will be refused) and the record read, if any, is returned.
   */
  async confirm(call: ProtectedCall, flight: Flight, claimToken: string): Promise<IdempotencyRecord | undefined> {
    if (!flight.confirming) {
      const gathered = this.gatherMs > 0 ? sleep(this.gatherMs) : setImmediatePromise();
      const read = gathered.then(() => this.repository.get({ key: call.recordKey, partition: call.partition }));
      flight.confirming = read;
      const done = () => {
        if (flight.confirming === read) flight.confirming = undefined;
      };
      read.then(done, done);
    }
    const record = await flight.confirming;
    if (record?.status === 'PENDING' && record.claimToken === claimToken) return localOwner(call, flight, claimToken);
    this.forget(call.recordKey, flight);
    return record;
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
