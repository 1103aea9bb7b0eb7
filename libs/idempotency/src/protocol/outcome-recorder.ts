import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@nestjs/common';
import {
  IdempotencyCommitRejectedError,
  IdempotencyLeaseLostError,
  IdempotencyStoreThrottledError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { IdempotencyClock } from '../idempotency.clock';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { StoredResponse } from '../repository/idempotency.record';
import { CompleteResult, IdempotencyRepository } from '../repository/idempotency.repository';
import { ResponseSealer } from '../response/response-sealing';
import { CommitWrite } from '../repository/commit-write';
import { ProtectedCall, retryAfterSeconds } from './protected-call';
import { ReplayCache } from './replay-cache';

/**
 * After the work ran, its completion (or release) is the most valuable write: a store fault there is retried with
 * backoff (100 ms doubling to 1 s) for this long, on top of the SDK's own retries, before it is given up.
 */
const SETTLE_RETRY_BUDGET_MS = 10_000;

/** Where the outcome recorder writes: the store, the replay cache, and what it needs to know of the module's options. */
export interface OutcomeRecorderDependencies {
  repository: IdempotencyRepository;
  clock: IdempotencyClock;
  telemetry: IdempotencyTelemetry;
  cache: ReplayCache;
  /** Set when `encryption` is: responses are sealed before they are stored. */
  sealer?: ResponseSealer;
  failedTtlSeconds: number;
}

/**
 * Writes the outcome of a run as its owner: COMPLETED with the stored response (with the work's `commitWith` writes,
 * in one transaction), or FAILED so that the key can be claimed again. Every write is guarded by the claim token; a
 * refusal is counted and logged, and never the caller's problem unless the work's writes depended on it.
 */
export class OutcomeRecorder {
  private readonly logger = new Logger('Idempotency');
  private readonly repository: IdempotencyRepository;
  private readonly clock: IdempotencyClock;
  private readonly telemetry: IdempotencyTelemetry;
  private readonly cache: ReplayCache;
  private readonly sealer?: ResponseSealer;
  private readonly failedTtlSeconds: number;

  constructor({ repository, clock, telemetry, cache, sealer, failedTtlSeconds }: OutcomeRecorderDependencies) {
    this.repository = repository;
    this.clock = clock;
    this.telemetry = telemetry;
    this.cache = cache;
    this.sealer = sealer;
    this.failedTtlSeconds = failedTtlSeconds;
  }

  /**
   * The completion with the work's `commitWith` writes, all or nothing. Unlike a plain completion, the work's effects
   * depend on it: the result is handed back only if the transaction committed. Lost lease → nothing written, in
   * flight (the successor's result counts); a write's own condition failed → nothing written, key released,
   * `commit-rejected`; a store fault after retries → key released, the fault (503).
   */
  async commit<T>(
    call: ProtectedCall,
    claimToken: string,
    stored: StoredResponse,
    writes: CommitWrite[],
    result: T,
  ): Promise<T> {
    let completion: CompleteResult;
    try {
      completion = this.noted(call, await this.complete(call, claimToken, stored, writes));
    } catch (error) {
      // Not committed as far as anyone knows. A release refused as already_completed means it did commit, unseen.
      const released = await this.release(call, claimToken);
      if (released?.ok === false && released.reason === 'already_completed') completion = released;
      else throw error;
    }
    if (completion.ok || completion.reason === 'already_completed') {
      const expiresAt = completion.ok ? completion.expiresAt : completion.current?.expiresAt;
      if (expiresAt !== undefined)
        this.cache.set(call.recordKey, { fingerprint: call.fingerprint, expiresAt, response: stored });
      this.telemetry.request('executed', call, stored.statusCode);
      return result;
    }
    if (completion.reason === 'commit_rejected') {
      await this.release(call, claimToken);
      throw commitRejected(this.logger, call, completion.writeIndex, writes);
    }
    throw new IdempotencyLeaseLostError(
      completion.current ? retryAfterSeconds(call, completion.current, this.clock.nowSeconds()) : 1,
    );
  }

  /**
   * The end of a run without `commitWith` writes: a final outcome (`stored`) completes the record, any other releases
   * the key. Either way the caller gets its own outcome: a completion that cannot be stored is logged. A promise chain
   * rather than an async function: it runs on every new key (see `runUnderClaim`).
   */
  settle(call: ProtectedCall, claimToken: string, stored: StoredResponse | undefined): Promise<void> {
    if (!stored) {
      this.telemetry.request('executed', call);
      return this.release(call, claimToken).then(() => undefined);
    }
    let completing: Promise<CompleteResult>;
    try {
      completing = this.complete(call, claimToken, stored);
    } catch (error) {
      completing = Promise.reject(error); // sealing threw
    }
    return completing.then(
      (completion) => this.completed(call, stored, this.noted(call, completion)),
      (error: unknown) => {
        // The work's effects happened; the caller gets them. The key unlocks when the lease ends.
        this.logger.error({ msg: 'completion not stored', key: call.recordKey, error: String(error) });
        this.telemetry.request('executed', call, stored.statusCode);
      },
    );
  }

  /** A completion's answer: a stored response goes to the replay cache, and the call is counted. */
  private completed(call: ProtectedCall, stored: StoredResponse, completion: CompleteResult): void {
    if (completion.ok) {
      this.cache.set(call.recordKey, {
        fingerprint: call.fingerprint,
        expiresAt: completion.expiresAt,
        response: stored,
      });
    }
    const outcome = !completion.ok && completion.reason === 'lease_lost' ? 'lease_lost' : 'executed';
    this.telemetry.request(outcome, call, outcome === 'executed' ? stored.statusCode : undefined);
  }

  /** PENDING → COMPLETED (with the writes, in one transaction), through store faults; `noted` reads the answer. */
  private complete(
    call: ProtectedCall,
    claimToken: string,
    response: StoredResponse,
    writes?: CommitWrite[],
  ): Promise<CompleteResult> {
    const sealed = this.sealer ? this.sealer.seal(call.recordKey, response) : response;
    return this.telemetry.storeSpan(
      'dedup.complete',
      call.recordKey,
      () =>
        retryThroughStoreFaults(() =>
          this.repository.complete({
            key: call.recordKey,
            partition: call.partition,
            claimToken,
            response: sealed,
            ttlSeconds: call.ttlSeconds,
            writes,
            stepBytes: call.steps?.bytes,
          }),
        ),
      writeOutcome,
    );
  }

  /**
   * A completion's answer, counted. A refusal is never the caller's problem (it still gets its own result), but the
   * same claim completing twice is a benign race, and another claim's COMPLETED record means the work ran for a key
   * that was already done (the lease was shorter than the work).
   */
  private noted(call: ProtectedCall, result: CompleteResult): CompleteResult {
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
  }

  /**
   * A run given up because a step found its lease lost: the key is released if this claim still owns it (its lease
   * had passed by this process's clock, but nobody took over), and nothing is counted here (the caller counts the
   * lease-lost error).
   */
  async abandon(call: ProtectedCall, claimToken: string): Promise<void> {
    await this.release(call, claimToken);
  }

  /**
   * Marks the attempt FAILED so the key is claimable again at once. Never masks the original outcome. Returns the
   * store's answer, or undefined when it could not be stored.
   */
  private async release(call: ProtectedCall, claimToken: string): Promise<CompleteResult | undefined> {
    try {
      const result = await retryThroughStoreFaults(() =>
        this.repository.fail({
          key: call.recordKey,
          partition: call.partition,
          claimToken,
          ttlSeconds: this.failedTtlSeconds,
          // Every step this run started was recorded: the next run's steps were not started by this one.
          forgetRun: call.steps?.unfinished === 0,
          // Its work ended here, whatever it was: this owner did not crash (`maxCrashedOwners`).
          endedCleanly: true,
        }),
      );
      if (!result.ok && result.reason !== 'already_failed') {
        this.logger.warn({ msg: 'release refused', key: call.recordKey, reason: result.reason });
      }
      return result;
    } catch (error) {
      this.logger.error({
        msg: 'release not stored; the key unlocks when its lease ends',
        key: call.recordKey,
        error: String(error),
      });
      return undefined;
    }
  }
}

/**
 * Retries a completion or release through store faults, within `SETTLE_RETRY_BUDGET_MS`. The first attempt's promise
 * is handed on as it is: a write that succeeds (nearly all) costs no frame of its own.
 */
export function retryThroughStoreFaults<T>(write: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + SETTLE_RETRY_BUDGET_MS;
  let first: Promise<T>;
  try {
    first = write();
  } catch (error) {
    first = Promise.reject(error);
  }
  return first.catch((error: unknown) => retried(write, error, deadline));
}

async function retried<T>(write: () => Promise<T>, error: unknown, deadline: number): Promise<T> {
  for (let delayMs = 100; ; delayMs = Math.min(delayMs * 2, 1000)) {
    const storeFault =
      error instanceof IdempotencyStoreThrottledError || error instanceof IdempotencyStoreUnavailableError;
    if (!storeFault || performance.now() + delayMs > deadline) throw error;
    await sleep(delayMs);
    try {
      return await write();
    } catch (next) {
      error = next;
    }
  }
}

/** The span outcome of a conditional write of the record (a completion, an optimistic put). */
export const writeOutcome = (result: { ok: true } | { ok: false; reason: string }) =>
  result.ok ? 'won' : result.reason;

/** `Put on orders`: a write as the commit-rejected problem names it. */
/**
 * A `commitWith` write refused by its own condition: the handler's outcome, not a fault (logged, not warned). The
 * client learns the write's index; the log which write it was, on which table.
 */
export function commitRejected(
  logger: Logger,
  call: ProtectedCall,
  writeIndex: number,
  writes: CommitWrite[],
): IdempotencyCommitRejectedError {
  const write = describeWrite(writes[writeIndex]);
  logger.log({
    msg: 'a commitWith write failed its condition; nothing was written',
    key: call.recordKey,
    writeIndex,
    write,
  });
  return new IdempotencyCommitRejectedError(writeIndex, write);
}

export function describeWrite(write: CommitWrite | undefined): string {
  const [action, target] = Object.entries(write ?? {})[0] ?? ['write', undefined];
  const table = (target as { TableName?: string } | undefined)?.TableName;
  return table ? `${action} on ${table}` : action;
}
