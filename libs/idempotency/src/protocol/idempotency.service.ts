import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { fingerprintValue, recordKey } from '../keys/fingerprint';
import {
  boundContext,
  ClaimScope,
  CommitWrite,
  IdempotencyContext,
  injectsIdempotencyContext,
  runInClaim,
  untrackContext,
} from './idempotency-context';
import { IdempotencyClock } from '../idempotency.clock';
import {
  IdempotencyCommitRejectedError,
  IdempotencyError,
  IdempotencyInFlightError,
  IdempotencyLeaseLostError,
  IdempotencyKeyMissingError,
  IdempotencyMismatchError,
  IdempotencyRecordUnreadableError,
  IdempotencyResultNotStoredError,
  IdempotencyStoreThrottledError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { validateKey } from '../keys/idempotency-key';
import { clockSkewFor, RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions, validateCallSettings } from '../options/idempotency.options';
import { IdempotencyRecord, isClaimable, StoredResponse } from '../repository/idempotency.record';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { LeaseHeartbeat } from './lease-heartbeat';
import { ReplayCache } from './replay-cache';
import { UnreadableRecordError } from '../response/response-sealing';
import { ClaimResult, CompleteResult, IdempotencyRepository } from '../repository/idempotency.repository';
import { replayedBody, storedResult } from '../response/stored-response.codec';

/** Options of `IdempotencyService.execute()`. */
export interface ExecuteOptions extends CallSettings {
  /**
   * What the function does (`'charge-card'`): part of the record key, so two different functions given the same
   * key (a message id, say) never share a record.
   */
  operation: string;
  /** The caller's key, e.g. a message id. Validated like an HTTP key (1–255 characters, no control characters). */
  key: string;
  /** What makes two calls "the same": any JSON value (e.g. the message payload). A different one is a mismatch. */
  fingerprint?: unknown;
  /** Namespace for the key (a tenant, a consumer name). */
  scope?: string;
}

/** Per-call settings; undefined fields fall back to the module's options. */
export interface CallSettings {
  ttlSeconds?: number;
  pendingTtlSeconds?: number;
  maxLeaseSeconds?: number;
  /** `IdempotencyInFlightError.retryAfterSeconds` (the 409's `Retry-After`). */
  retryAfterSeconds?: number;
  /** 0 (default): throw `IdempotencyInFlightError` at once while another call runs; otherwise wait up to this long. */
  waitMs?: number;
}

/** One protected call, as the protocol needs it. */
export interface ProtectedCall {
  /** The partition key: never the raw client key. */
  recordKey: string;
  fingerprint: string;
  leaseSeconds: number;
  maxLeaseSeconds: number;
  retryAfterSeconds: number;
  ttlSeconds: number;
  waitMs: number;
  /** How far another process's clock may run ahead (see `clockSkewSeconds`). */
  clockSkewSeconds: number;
}

/** How one kind of caller (HTTP, RPC, a function) plugs into the protocol. */
export interface ProtectedWork<T> {
  /** The call, or undefined to run without protection (an optional key that is absent). May throw key errors. */
  describe(): ProtectedCall | undefined | Promise<ProtectedCall | undefined>;
  /** Runs the work once; as the key's owner, with a context bound to its claim. */
  execute(context?: IdempotencyContext): Promise<T>;
  /**
   * What to store for replays of a result (`bodyOmitted` when it cannot be replayed). Called after the work
   * succeeded: if it throws, the work is still recorded as done, without a body.
   */
  capture(result: T): StoredResponse;
  /**
   * What would be stored for an error the work threw (an HTTP or RPC exception, replayed by throwing it again), or
   * undefined for an error that cannot be replayed: the key is then released for a re-run.
   */
  captureError?(error: unknown): StoredResponse | undefined;
  /**
   * Whether an outcome is final (`storeIf`): stored and replayed to every duplicate, or released for a re-run.
   * Without it, every result is final and no error is.
   */
  isFinal?(stored: StoredResponse, error?: unknown): boolean;
  /** Turns a stored response back into a result for a duplicate; throws for a stored error. */
  replay(stored: StoredResponse): T;
}

const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 500;
/**
 * After the work ran, its completion (or release) is the most valuable write: a store fault there is retried with
 * backoff (100 ms doubling to 1 s) for this long, on top of the SDK's own retries, before it is given up.
 */
const SETTLE_RETRY_BUDGET_MS = 10_000;

/**
 * One claim in this process, shared by every concurrent request with the same key (single-flight): only the first
 * calls DynamoDB; the others learn from its answer, and wait for a local owner without polling.
 */
interface Flight {
  claim: Promise<ClaimResult>;
  /** The claiming request's fingerprint and lease end (epoch seconds), for requests that join it. */
  fingerprint: string;
  leaseEndsAt: number;
  /** Resolves once a local owner has completed or released the key. */
  settled: Promise<void>;
  settle(): void;
}

type Acquired = { claimToken: string; flight: Flight } | { replay: StoredResponse };

/**
 * The idempotency protocol, for any async function: claim the key → run → complete (or fail), or for a duplicate
 * replay the stored result, refuse a different request, or report the call in flight. `@Idempotent()` routes and
 * message handlers use the same protocol through `run()`.
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
export class IdempotencyService implements OnModuleInit, OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Idempotency');
  private readonly cache: ReplayCache;
  private readonly flights = new Map<string, Flight>();
  private readonly heartbeats = new Set<LeaseHeartbeat>();
  /** Whether the repository commits `commitWith` writes; undefined until it has answered. */
  private commitSupport?: boolean;
  /** Whether the injected `IdempotencyContext` must find calls (through AsyncLocalStorage): see `onModuleInit`. */
  private tracked = true;

  constructor(
    private readonly repository: IdempotencyRepository,
    private readonly clock: IdempotencyClock,
    private readonly telemetry: IdempotencyTelemetry,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly context: IdempotencyContext,
    private readonly modules: ModulesContainer,
  ) {
    this.cache = new ReplayCache(this.options.replayCacheEntries);
  }

  /**
   * Calls are tracked through AsyncLocalStorage only when something in the application has `IdempotencyContext`
   * injected: on Node 20 and 22 it adds work to every promise of the process (measured: 16 % more CPU on an
   * unrelated route, bench/RESULTS.md). `execute()` hands its function a context bound to the call either way.
   */
  onModuleInit(): void {
    const wrappers = [...this.modules.values()].flatMap((module) => [
      ...module.providers.values(),
      ...module.controllers.values(),
      ...module.injectables.values(),
      ...module.middlewares.values(),
    ]);
    this.tracked = wrappers.some((wrapper) => wrapper.metatype !== IdempotencyService && injectsIdempotencyContext(wrapper));
    if (!this.tracked) untrackContext(this.context);
  }

  /**
   * Checks the store (`failOnStartup`: a problem stops the application) and asks it once whether it has
   * transactions, so `canCommitWith` is known before the first call.
   */
  async onApplicationBootstrap(): Promise<void> {
    try {
      await this.repository.checkReady();
    } catch (error) {
      if (this.options.failOnStartup) throw error;
      this.logger.error({ msg: 'the idempotency store cannot be used (failOnStartup: false, starting anyway)', error: String(error) });
      return;
    }
    await this.commitSupported().catch(() => undefined);
  }

  /** Whether `commitWith` works on this store (asked once; a store fault leaves it to the next call). */
  async commitSupported(): Promise<boolean> {
    this.commitSupport ??= await this.repository.supportsCommitWith();
    return this.commitSupport;
  }

  /**
   * Runs `fn` once per key. Duplicates get the first call's result (the JSON it would be sent as; `undefined`,
   * falsy and empty values exactly). Throws `IdempotencyInFlightError`, `IdempotencyMismatchError`,
   * `IdempotencyStoreThrottledError` or `IdempotencyStoreUnavailableError` instead of running `fn` again.
   */
  async execute<T>(options: ExecuteOptions, fn: (context: IdempotencyContext) => T | Promise<T>): Promise<T> {
    const { operation } = options;
    if (typeof operation !== 'string' || operation.length === 0) {
      throw new TypeError('IdempotencyService.execute needs an operation name (e.g. { operation: \'charge-card\', key }).');
    }
    validateCallSettings(options, `IdempotencyService.execute(${operation})`, this.options.clockSkewSeconds);
    return this.run<T>({
      describe: () => {
        const key = validateKey(options.key);
        if (key === undefined) throw new IdempotencyKeyMissingError('IdempotencyService.execute needs a key.');
        return this.call(recordKey(`fn ${operation}`, options.scope, key), fingerprintValue(options.fingerprint), options);
      },
      execute: async (context) => fn(context ?? this.context),
      capture: storedResult,
      replay: (stored) => replayedBody(stored) as T,
    });
  }

  /** Fills a call's settings from the module's options (overrides are validated where they are declared). */
  call(recordKey: string, fingerprint: string, settings: CallSettings): ProtectedCall {
    const leaseSeconds = settings.pendingTtlSeconds ?? this.options.pendingTtlSeconds;
    return {
      recordKey,
      fingerprint,
      leaseSeconds,
      maxLeaseSeconds: settings.maxLeaseSeconds ?? this.options.maxLeaseSeconds,
      retryAfterSeconds: settings.retryAfterSeconds ?? this.options.retryAfterSeconds,
      ttlSeconds: settings.ttlSeconds ?? this.options.ttlSeconds,
      waitMs: settings.waitMs ?? 0,
      clockSkewSeconds: clockSkewFor(leaseSeconds, this.options.clockSkewSeconds),
    };
  }

  /** A stopping process renews nothing more: for the other instances it is as if it had crashed. */
  onApplicationShutdown(): void {
    for (const heartbeat of this.heartbeats) heartbeat.stop();
    this.heartbeats.clear();
  }

  /** The protocol. Every outcome is counted in `idempotency_requests_total`. */
  async run<T>(work: ProtectedWork<T>): Promise<T> {
    try {
      const call = await work.describe();
      if (!call) return await work.execute();
      const acquired = await this.acquire(call);
      if ('replay' in acquired) {
        this.telemetry.request('replayed');
        return work.replay(acquired.replay);
      }
      try {
        return await this.runAsOwner(call, acquired.claimToken, work, acquired.flight);
      } finally {
        this.forget(call.recordKey, acquired.flight);
      }
    } catch (error) {
      if (error instanceof IdempotencyError) this.telemetry.request(error.outcome);
      throw error;
    }
  }

  /**
   * Owns the key or finds out why not. A COMPLETED record this process has seen answers from memory. Otherwise the
   * key is claimed (once per process for concurrent requests). A lost claim is a duplicate: a different request →
   * mismatch (checked first), a completed one → replay, one still running → in flight or, with `waitMs`, wait until
   * it completes. If the owner failed or its lease ran out meanwhile, claim again.
   */
  private async acquire(call: ProtectedCall): Promise<Acquired> {
    const waitUntil = performance.now() + call.waitMs;
    let pollMs = FIRST_POLL_MS;
    for (let attempt = 1; ; attempt++) {
      const cached = this.cache.get(call.recordKey, this.clock.nowSeconds());
      if (cached) {
        if (cached.fingerprint !== call.fingerprint) throw new IdempotencyMismatchError();
        return { replay: cached.response };
      }
      const { claim, flight, local } = await this.claimOnce(call);
      if (claim.claimed && !local) return { claimToken: claim.claimToken, flight };

      let existing: IdempotencyRecord | undefined = claim.claimed ? localOwner(call, flight, claim.claimToken) : claim.existing;
      while (existing && !isClaimable(existing, this.clock.nowSeconds(), call.clockSkewSeconds)) {
        if (existing.fingerprint !== call.fingerprint) throw new IdempotencyMismatchError();
        if (existing.status === 'COMPLETED') {
          const response = this.completedResponse(existing);
          this.cache.set(call.recordKey, { fingerprint: existing.fingerprint, expiresAt: existing.expiresAt, response });
          return { replay: response };
        }
        const waitLeft = waitUntil - performance.now();
        if (waitLeft <= 0) throw new IdempotencyInFlightError(this.retryAfter(call, existing));
        if (local) {
          // The owner is in this process: wait for it to settle, then look again (the cache has its result).
          await settledWithin(flight.settled, waitLeft);
          existing = undefined;
          break;
        }
        await sleep(Math.min(pollMs, Math.max(1, waitLeft)));
        pollMs = Math.min(pollMs * 2, MAX_POLL_MS);
        existing = await this.repository.get({ key: call.recordKey });
      }
      if (local && performance.now() < waitUntil) continue;
      // The owner failed, its lease ran out or its record vanished: claimable again, within the wait budget.
      if (attempt > 1 && performance.now() >= waitUntil) throw new IdempotencyInFlightError(1);
    }
  }

  /**
   * The claim, single-flight: the first request for a key in this process sends it; concurrent ones share its
   * answer. `local` is true for those that joined a claim another request in this process won: its owner is here.
   */
  private async claimOnce(call: ProtectedCall): Promise<{ claim: ClaimResult; flight: Flight; local: boolean }> {
    const joined = this.flights.get(call.recordKey);
    // A local owner whose lease has passed is no reason to wait: claim in DynamoDB like any other process would.
    if (joined && joined.leaseEndsAt >= this.clock.nowSeconds()) {
      const claim = await joined.claim;
      return { claim, flight: joined, local: claim.claimed };
    }

    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const claim = this.telemetry.span('dedup.claim', { 'idempotency.key': call.recordKey }, async (span) => {
      const result = await this.repository.claim({
        key: call.recordKey,
        fingerprint: call.fingerprint,
        leaseSeconds: call.leaseSeconds,
        clockSkewSeconds: call.clockSkewSeconds,
      });
      span.setAttribute('dynamo.condition_result', result.claimed ? 'won' : 'lost');
      return result;
    });
    const leaseEndsAt = this.clock.nowSeconds() + call.leaseSeconds;
    const flight: Flight = { claim, fingerprint: call.fingerprint, leaseEndsAt, settled, settle };
    this.flights.set(call.recordKey, flight);
    let claimed = false;
    try {
      const result = await claim;
      claimed = result.claimed;
      return { claim: result, flight, local: false };
    } finally {
      // A lost or failed claim is over at once; a won one lasts until its owner settles (see run()).
      if (!claimed) this.forget(call.recordKey, flight);
    }
  }

  /** Ends a flight: requests waiting on it look again. A successor's flight for the same key is left alone. */
  private forget(recordKey: string, flight: Flight): void {
    if (this.flights.get(recordKey) === flight) this.flights.delete(recordKey);
    flight.settle();
  }

  /**
   * Runs the work as the key's owner, its lease renewed meanwhile, then records the outcome before the result is
   * handed back. Once the work has succeeded the key is never released for a re-run: a result that cannot be stored
   * completes the record without a body.
   */
  private async runAsOwner<T>(call: ProtectedCall, claimToken: string, work: ProtectedWork<T>, flight: Flight): Promise<T> {
    const heartbeat = new LeaseHeartbeat(this.repository, this.telemetry, {
      key: call.recordKey,
      claimToken,
      leaseSeconds: call.leaseSeconds,
      maxLeaseSeconds: call.maxLeaseSeconds,
      renewed: (expiresAt) => (flight.leaseEndsAt = expiresAt),
    });
    this.heartbeats.add(heartbeat);
    const scope: ClaimScope = {
      recordKey: call.recordKey,
      claimToken,
      canCommitWith: this.commitSupport ?? (await this.commitSupported().catch(() => false)),
      writes: [],
      open: true,
    };
    try {
      let result: T;
      try {
        result = await runInClaim(scope, () => work.execute(boundContext(scope)), this.tracked);
      } catch (error) {
        // A final error (storeIf) is stored and replayed like a result; any other releases the key. Its writes are dropped.
        const stored = this.capturedError(call, work, error);
        await this.settle(call, claimToken, stored && this.isFinal(call, work, stored, error) ? stored : undefined);
        throw error;
      } finally {
        scope.open = false;
      }
      const stored = this.captured(call, work, result);
      // Writes make the outcome final whatever storeIf says: they are committed with it, so their effects exist.
      if (scope.writes.length > 0) return await this.commit(call, claimToken, stored, scope.writes, result);
      await this.settle(call, claimToken, this.isFinal(call, work, stored) ? stored : undefined);
      return result;
    } finally {
      heartbeat.stop();
      this.heartbeats.delete(heartbeat);
    }
  }

  /**
   * The completion with the work's `commitWith` writes, all or nothing. Unlike a plain completion, the work's effects
   * depend on it: the result is handed back only if the transaction committed. Lost lease → nothing written, in
   * flight (the successor's result counts); a write's own condition failed → nothing written, key released,
   * `commit-rejected`; a store fault after retries → key released, the fault (503).
   */
  private async commit<T>(call: ProtectedCall, claimToken: string, stored: StoredResponse, writes: CommitWrite[], result: T): Promise<T> {
    let completion: CompleteResult;
    try {
      completion = await this.complete(call, claimToken, stored, writes);
    } catch (error) {
      // Not committed as far as anyone knows. A release refused as already_completed means it did commit, unseen.
      const released = await this.release(call, claimToken);
      if (released?.ok === false && released.reason === 'already_completed') completion = released;
      else throw error;
    }
    if (completion.ok || completion.reason === 'already_completed') {
      const expiresAt = completion.ok ? completion.expiresAt : completion.current?.expiresAt;
      if (expiresAt !== undefined) this.cache.set(call.recordKey, { fingerprint: call.fingerprint, expiresAt, response: stored });
      this.telemetry.request('executed');
      return result;
    }
    if (completion.reason === 'commit_rejected') {
      await this.release(call, claimToken);
      throw new IdempotencyCommitRejectedError(completion.writeIndex, describeWrite(writes[completion.writeIndex]));
    }
    throw new IdempotencyLeaseLostError(completion.current ? this.retryAfter(call, completion.current) : 1);
  }

  /**
   * The end of a run without `commitWith` writes: a final outcome (`stored`) completes the record, any other releases
   * the key. Either way the caller gets its own outcome.
   */
  private async settle(call: ProtectedCall, claimToken: string, stored: StoredResponse | undefined): Promise<void> {
    if (!stored) {
      this.telemetry.request('executed');
      await this.release(call, claimToken);
      return;
    }
    const completion = await this.completeAlone(call, claimToken, stored);
    if (completion?.ok) {
      this.cache.set(call.recordKey, { fingerprint: call.fingerprint, expiresAt: completion.expiresAt, response: stored });
    }
    this.telemetry.request(completion?.ok === false && completion.reason === 'lease_lost' ? 'lease_lost' : 'executed');
  }

  /** What to store for a result; a result that cannot be stored (or whose capture throws) is recorded without a body. */
  private captured<T>(call: ProtectedCall, work: ProtectedWork<T>, result: T): StoredResponse {
    let stored: StoredResponse;
    try {
      stored = work.capture(result);
    } catch (error) {
      stored = { statusCode: 200, headers: {}, bodyOmitted: true };
      this.logger.error({ msg: 'capturing the result failed', key: call.recordKey, error: String(error) });
    }
    if (stored.bodyOmitted) {
      this.logger.warn({
        msg: 'result cannot be stored for replay (a raw stream, or not JSON): recorded as done without a body; duplicates get 409 response-not-stored',
        key: call.recordKey,
      });
    }
    return stored;
  }

  /** A COMPLETED record's response, opened when sealed. One that cannot be replayed fails closed: it never runs again. */
  private completedResponse(record: IdempotencyRecord): StoredResponse {
    const response = record.response;
    if (!response || response.bodyOmitted) throw new IdempotencyResultNotStoredError(response?.statusCode ?? 0);
    if (!this.options.sealer) return response;
    try {
      return this.options.sealer.open(record.key, response);
    } catch (error) {
      const reason = error instanceof UnreadableRecordError ? error.message : `it cannot be decoded (${String(error)})`;
      this.logger.error({ msg: 'stored response unreadable; answering 500 record-unreadable, never re-running', key: record.key, reason });
      throw new IdempotencyRecordUnreadableError(reason);
    }
  }

  /**
   * `storeIf`'s verdict. Without one, results are final and errors are not; a `storeIf` that throws is logged and
   * read the same way (a result's work is done; an error's may be retried).
   */
  private isFinal<T>(call: ProtectedCall, work: ProtectedWork<T>, stored: StoredResponse, error?: unknown): boolean {
    const fallback = error === undefined;
    try {
      return work.isFinal?.(stored, error) ?? fallback;
    } catch (storeIfError) {
      this.logger.error({ msg: `storeIf threw; the outcome is ${fallback ? 'stored' : 'not stored'}`, key: call.recordKey, error: String(storeIfError) });
      return fallback;
    }
  }

  /** What to store for a thrown error when it is final; undefined releases the key (also when capturing throws). */
  private capturedError<T>(call: ProtectedCall, work: ProtectedWork<T>, error: unknown): StoredResponse | undefined {
    try {
      return work.captureError?.(error);
    } catch (captureError) {
      this.logger.error({ msg: 'capturing the error failed; the key is released', key: call.recordKey, error: String(captureError) });
      return undefined;
    }
  }

  /**
   * `Retry-After` for a duplicate of a running call: the route's `retryAfterSeconds`, but never past the moment the
   * owner's lease could be taken over. A claim succeeds once `expires_at < now − clockSkewSeconds` (whole seconds), so
   * that moment is `expires_at + clockSkewSeconds + 1`.
   */
  private retryAfter(call: ProtectedCall, owner: IdempotencyRecord): number {
    const takeover = Math.floor(owner.expiresAt + call.clockSkewSeconds) + 1;
    return Math.max(1, Math.min(call.retryAfterSeconds, takeover - this.clock.nowSeconds()));
  }

  /**
   * PENDING → COMPLETED. A refusal is never the caller's problem (it still gets its own result), but it is
   * counted: the same claim completing twice is a benign race; another claim's COMPLETED record means the work
   * ran for a key that was already done (the lease was shorter than the work).
   */
  private async complete(
    call: ProtectedCall,
    claimToken: string,
    response: StoredResponse,
    writes?: CommitWrite[],
  ): Promise<CompleteResult> {
    return this.telemetry.span('dedup.complete', { 'idempotency.key': call.recordKey }, async (span) => {
      const sealed = this.options.sealer ? this.options.sealer.seal(call.recordKey, response) : response;
      const result = await retryThroughStoreFaults(() =>
        this.repository.complete({ key: call.recordKey, claimToken, response: sealed, ttlSeconds: call.ttlSeconds, writes }),
      );
      span.setAttribute('dynamo.condition_result', result.ok ? 'won' : result.reason);
      if (result.ok || result.reason === 'commit_rejected') return result;
      if (result.reason === 'already_completed') this.telemetry.completionRaced();
      if (result.reason === 'lease_lost' && result.current?.status === 'COMPLETED') this.telemetry.reexecutionDetected();
      this.logger.warn({
        msg: 'completion refused',
        key: call.recordKey,
        reason: result.reason,
        current_status: result.current?.status,
        pending_since: result.current?.pendingSince,
      });
      return result;
    });
  }

  /** A completion without writes: a failure to store it is logged, and the caller still gets its result. */
  private async completeAlone(call: ProtectedCall, claimToken: string, response: StoredResponse): Promise<CompleteResult | undefined> {
    try {
      return await this.complete(call, claimToken, response);
    } catch (error) {
      // The work's effects happened; the caller gets them. The key unlocks when the lease ends.
      this.logger.error({ msg: 'completion not stored', key: call.recordKey, error: String(error) });
      return undefined;
    }
  }

  /**
   * Marks the attempt FAILED so the key is claimable again at once. Never masks the original outcome. Returns the
   * store's answer, or undefined when it could not be stored.
   */
  private async release(call: ProtectedCall, claimToken: string): Promise<CompleteResult | undefined> {
    try {
      const result = await retryThroughStoreFaults(() =>
        this.repository.fail({ key: call.recordKey, claimToken, ttlSeconds: this.options.failedTtlSeconds }),
      );
      if (!result.ok && result.reason !== 'already_failed') {
        this.logger.warn({ msg: 'release refused', key: call.recordKey, reason: result.reason });
      }
      return result;
    } catch (error) {
      this.logger.error({ msg: 'release not stored; the key unlocks when its lease ends', key: call.recordKey, error: String(error) });
      return undefined;
    }
  }
}

/** Retries a completion or release through store faults, within `SETTLE_RETRY_BUDGET_MS`. */
async function retryThroughStoreFaults<T>(write: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + SETTLE_RETRY_BUDGET_MS;
  for (let delayMs = 100; ; delayMs = Math.min(delayMs * 2, 1000)) {
    try {
      return await write();
    } catch (error) {
      const storeFault = error instanceof IdempotencyStoreThrottledError || error instanceof IdempotencyStoreUnavailableError;
      if (!storeFault || performance.now() + delayMs > deadline) throw error;
      await sleep(delayMs);
    }
  }
}

/** Waits for `settled`, at most `ms`, without leaving a timer behind. */
async function settledWithin(settled: Promise<void>, ms: number): Promise<void> {
  const timer = new AbortController();
  await Promise.race([settled, sleep(ms, undefined, { signal: timer.signal }).catch(() => undefined)]);
  timer.abort();
}

/** What a request that joined a local owner's claim knows of the record: PENDING, with the owner's lease. */
function localOwner(call: ProtectedCall, flight: Flight, claimToken: string): IdempotencyRecord {
  return {
    key: call.recordKey,
    status: 'PENDING',
    expiresAt: flight.leaseEndsAt,
    claimToken,
    fingerprint: flight.fingerprint,
    pendingSince: flight.leaseEndsAt - call.leaseSeconds,
  };
}

/** `Put on orders`: a write as the commit-rejected problem names it. */
function describeWrite(write: CommitWrite | undefined): string {
  const [action, target] = Object.entries(write ?? {})[0] ?? ['write', undefined];
  const table = (target as { TableName?: string } | undefined)?.TableName;
  return table ? `${action} on ${table}` : action;
}
