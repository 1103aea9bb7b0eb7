import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { IdempotencyError, IdempotencyInFlightError, IdempotencyMismatchError } from '../errors/idempotency.errors';
import { IdempotencyClock } from '../idempotency.clock';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { claimableBy, IdempotencyRecord, isFinalFailure, StoredResponse } from '../repository/idempotency.record';
import { ClaimResult, IdempotencyRepository } from '../repository/idempotency.repository';
import { StoreReadiness } from '../startup/store-readiness';
import { CallTracking } from './call-tracking';
import { replayOf } from './completed-response';
import { IdempotencyContext, refuseReentrant } from './idempotency-context';
import { checkExecuteOptions, functionWork } from './function-work';
import { FIRST_POLL_MS, KeyOutcome, MAX_POLL_MS, OutcomeLookup, OutcomeTarget } from './outcome-lookup';
import { heldByInvocation } from './invocation-deadline';
import { KeyOwner } from './key-owner';
import { OptimisticRun } from './optimistic-run';
import { OutcomeRecorder } from './outcome-recorder';
import { finalFailureError } from './poisoned-keys';
import {
  CallSettings,
  ExecuteOptions,
  protectedCall,
  ProtectedCall,
  ProtectedWork,
  retryAfterSeconds,
} from './protected-call';
import { ReplayCache } from './replay-cache';
import { FlightTaken, localOwner, SingleFlight, WonClaim, wonClaim } from './single-flight';
import { refuseOtherVersion } from './step-versions';

export type { CallSettings, ExecuteOptions, ProtectedCall, ProtectedWork } from './protected-call';

type Acquired = WonClaim | { replay: StoredResponse };

/**
 * The idempotency protocol, for any async function: claim the key → run → complete (or fail), or for a duplicate
 * replay the stored result, refuse a different request, or report the call in flight. `@Idempotent()` routes and
 * message handlers use the same protocol through `run()`. The claim is single-flight in this process (`SingleFlight`),
 * the owner's run and its outcome are `KeyOwner`'s and `OutcomeRecorder`'s; `mode: 'optimistic'` skips the claim
 * (`OptimisticRun`).
 *
 * @example
 * ```ts
 * const receipt = await idempotency.execute(
 *   { operation: 'charge-card', key: message.id, fingerprint: message.body },
 *   () => charge(message),
 * );
 * ```
 */
@Injectable()
export class IdempotencyService implements OnApplicationShutdown {
  private readonly logger = new Logger('Idempotency');
  private readonly cache: ReplayCache;
  private readonly flights: SingleFlight;
  private readonly owner: KeyOwner;
  private readonly optimistic: OptimisticRun;
  private readonly outcomes: OutcomeLookup;

  constructor(
    private readonly repository: IdempotencyRepository,
    private readonly clock: IdempotencyClock,
    private readonly telemetry: IdempotencyTelemetry,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly readiness: StoreReadiness,
    tracking: CallTracking,
  ) {
    this.cache = new ReplayCache({
      maxEntries: options.replayCacheEntries,
      maxAgeSeconds: options.replayCacheMaxAgeSeconds,
      clock,
    });
    this.flights = new SingleFlight(repository, clock, telemetry, options.confirmationGatherMs);
    telemetry.outcomes.hook = options.onOutcome;
    this.outcomes = new OutcomeLookup(repository, clock, options);
    const recorder = new OutcomeRecorder({
      repository,
      clock,
      telemetry,
      cache: this.cache,
      sealer: options.sealer,
      failedTtlSeconds: options.failedTtlSeconds,
    });
    const { watch } = tracking;
    const environment = { canCommitWith: () => readiness.commitSupported(), tracked: () => tracking.tracked, watch };
    this.owner = new KeyOwner({ repository, clock, telemetry, sealer: options.sealer }, recorder, environment);
    this.optimistic = new OptimisticRun({
      ...environment,
      repository,
      clock,
      telemetry,
      cache: this.cache,
      sealer: options.sealer,
    });
  }

  /** Whether `commitWith` works on this store (asked once; a store fault leaves it to the next call). */
  async commitSupported(): Promise<boolean> {
    return this.readiness.commitSupported();
  }

  /**
   * Runs `fn` once per key; duplicates get the first call's result (as JSON; `undefined`, falsy and empty values
   * exactly), or the module's error (`IdempotencyInFlightError`, a mismatch, a store fault) instead of a second run.
   */
  async execute<T>(options: ExecuteOptions, fn: (context: IdempotencyContext) => T | Promise<T>): Promise<T> {
    return this.run<T>(
      functionWork(options, fn, this.options, (key, fingerprint, settings) => this.call(key, fingerprint, settings)),
    );
  }

  /**
   * What `execute()` stored for a key, asked by the key alone (the operation, key and scope it was called with):
   * `KeyOutcome`. With `waitMs` (at most 60 s), an in-flight key is read again until it settles (a long poll).
   */
  outcome(target: OutcomeTarget, { waitMs = 0 }: { waitMs?: number } = {}): Promise<KeyOutcome> {
    return this.outcomes.ofCall(target, waitMs);
  }

  /** `execute()`'s checks, without running anything (`processBatch`'s first): a `TypeError` naming a bad option. */
  checkOptions(options: Omit<ExecuteOptions, 'key'>): void {
    checkExecuteOptions(options, this.options);
  }

  /** Fills a call's settings from the module's options (overrides are validated where they are declared). */
  call(recordKey: string, fingerprint: string, settings: CallSettings & { partition?: string }): ProtectedCall {
    return protectedCall(recordKey, fingerprint, settings, this.options);
  }

  /**
   * Forgets what this process knows of a record an operator removed (`IdempotencyAdmin`'s purge or release): its
   * cached answer. Other processes see the removal once their cached entries' `replayCache.maxAgeSeconds` has passed.
   */
  forget(recordKey: string): void {
    this.cache.evict(recordKey);
  }

  /** A stopping process renews nothing more: for the other instances it is as if it had crashed. */
  onApplicationShutdown(): void {
    this.owner.stopRenewing();
  }

  /**
   * The protocol. Every outcome is counted in `idempotency_requests_total`. Inside a Lambda invocation
   * (`withLambdaContext`), the invocation does not end before the call has settled.
   */
  run<T>(work: ProtectedWork<T>): Promise<T> {
    return heldByInvocation(this.protect(work));
  }

  private async protect<T>(work: ProtectedWork<T>): Promise<T> {
    const report = this.telemetry.outcomes.report(() => work.origin?.());
    let call: ProtectedCall | undefined;
    try {
      const described = work.describe();
      call = described instanceof Promise ? await described : described;
      if (!call) return await work.execute();
      refuseReentrant(call.recordKey);
      call.transport = work.transport;
      if (report) call.report = report;
      const acquired =
        call.mode === 'optimistic'
          ? (this.cache.replayFor(call, this.telemetry) ?? (await this.optimistic.run(call, work)))
          : await this.acquire(call);
      if ('result' in acquired) return acquired.result;
      if ('replay' in acquired) {
        this.telemetry.request('replayed', call, acquired.replay.statusCode);
        return work.replay(acquired.replay);
      }
      try {
        return await this.owner.run(call, acquired, work);
      } finally {
        this.flights.forget(call.recordKey, acquired.flight);
      }
    } catch (error) {
      const counted = call ?? { report, transport: work.transport };
      if (error instanceof IdempotencyError) this.telemetry.request(error.outcome, counted);
      throw error;
    }
  }

  /**
   * Owns the key or finds out why not. A COMPLETED record this process has seen answers from memory. Otherwise the
   * key is claimed (once per process for concurrent requests). A claim won, as nearly every new key's is, is handed
   * over from the claim's own promise: no async frame of its own on every new key (see `runUnderClaim`).
   */
  private acquire(call: ProtectedCall): Acquired | Promise<Acquired> {
    const cached = this.cache.replayFor(call, this.telemetry);
    if (cached) return cached;
    const waitUntil = performance.now() + call.waitMs;
    const taken = this.flights.take(call);
    return taken.flight.claim.then((claim) => wonClaim(taken, claim) ?? this.contend(call, waitUntil, taken, claim));
  }

  /**
   * A claim this request did not win: a duplicate. A different request → mismatch (checked first), a completed one →
   * replay, one still running → in flight or, with `waitMs`, wait until it completes. If the owner failed or its
   * lease ran out meanwhile, claim again.
   */
  private async contend(
    call: ProtectedCall,
    waitUntil: number,
    taken: FlightTaken,
    claim: ClaimResult,
  ): Promise<Acquired> {
    let pollMs = FIRST_POLL_MS;
    for (let attempt = 1; ; attempt++) {
      const { flight, joined } = taken;
      // Joined a claim this process won: the owner is here, confirmed in the store before a 409 (`SingleFlight.confirm`).
      const localToken = joined && claim.claimed ? claim.claimToken : undefined;
      let confirmed = localToken === undefined;
      let existing: IdempotencyRecord | undefined = claim.claimed
        ? localOwner(call, flight, claim.claimToken)
        : claim.existing;
      if (existing) refuseOtherVersion(call, existing, this.clock.nowSeconds());
      while (existing && !claimableBy(existing, call.fingerprint, this.clock.nowSeconds(), call.clockSkewSeconds)) {
        if (existing.fingerprint !== call.fingerprint) throw new IdempotencyMismatchError();
        if (isFinalFailure(existing)) throw finalFailureError(existing);
        if (existing.status === 'COMPLETED') {
          const { sealer } = this.options;
          return { replay: replayOf(call.recordKey, existing, { sealer, logger: this.logger, cache: this.cache }) };
        }
        const waitLeft = waitUntil - performance.now();
        if (waitLeft <= 0 && confirmed)
          throw new IdempotencyInFlightError(retryAfterSeconds(call, existing, this.clock.nowSeconds()));
        if (waitLeft <= 0) {
          confirmed = true;
          existing = await this.flights.confirm(call, flight, localToken!);
          continue;
        }
        if (localToken !== undefined) {
          // The owner is in this process: wait for it to settle, then look again (the cache has its result).
          await flight.settledWithin(waitLeft);
          break;
        }
        await sleep(Math.min(pollMs, Math.max(1, waitLeft)));
        pollMs = Math.min(pollMs * 2, MAX_POLL_MS);
        existing = await this.repository.get({ key: call.recordKey, partition: call.partition });
      }
      // The owner settled, failed, its lease ran out or its record vanished: claim again, within the wait budget.
      if (attempt > 1 && performance.now() >= waitUntil) throw new IdempotencyInFlightError(1);
      const cached = this.cache.replayFor(call);
      if (cached) return cached;
      taken = this.flights.take(call);
      claim = await taken.flight.claim;
      const owned = wonClaim(taken, claim);
      if (owned) return owned;
    }
  }
}
