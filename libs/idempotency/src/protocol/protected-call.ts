import { IdempotencyRecord, StoredResponse } from '../repository/idempotency.record';
import { CallPolicy, callPolicy, CallSettings } from '../options/route-settings';
import { ResolvedIdempotencyOptions } from '../options/resolved-options';
import { invocationDeadlineSeconds } from './invocation-deadline';
import type { IdempotencyContext } from './idempotency-context';
import type { CallReport } from '../observability/outcome-events';
import type { BatchTransport, IdempotencyOutcomeEvent } from '../errors/outcomes';

export type { CallSettings } from '../options/route-settings';

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
  /** Namespace for the key (a tenant, a consumer name); a number enters the record key as its decimal text. */
  scope?: string | number;
  /** With a sort-key layout: the record's partition, instead of the key prefix and the scope's hash. */
  partitionKeyValue?: string;
  /** How the call came in, as its outcome event says: `'function'` (default), or a Lambda batch's event source. */
  transport?: 'function' | BatchTransport;
}

/** One protected call, as the protocol needs it. */
export interface ProtectedCall extends CallPolicy {
  /** The record key: never the raw client key. */
  recordKey: string;
  /** Its partition in a table with a sort key (the caller's scope, or `partitionKeyValue`). */
  partition?: string;
  fingerprint: string;
  /**
   * Inside an AWS Lambda invocation (`withLambdaContext`): its deadline, epoch seconds. The lease never ends later.
   */
  deadline?: number;
  /** Where the call came from and when, for its outcome event: set only while someone listens (`OutcomeEvents`). */
  report?: CallReport;
  /** How the call came in, for `idempotency_requests_total` (its work's `transport`). */
  transport?: IdempotencyOutcomeEvent['transport'];
  /** Its steps as its owner runs them (`StepJournal`): set once the key is claimed. */
  steps?: StepLedger;
}

/**
 * What the outcome's writes need to know of a run's steps: the bytes the record's steps take (its response is stored
 * in what the item has left), and how many steps this run started and did not record (none: a release tells the store
 * that this run counts for no step's `attempt`).
 */
export interface StepLedger {
  bytes: number;
  unfinished: number;
}

/** The lease to write now: the call's own, cut at the invocation's deadline (0 once it has passed). */
export function leaseSecondsAt(call: Pick<ProtectedCall, 'leaseSeconds' | 'deadline'>, nowSeconds: number): number {
  if (call.deadline === undefined) return call.leaseSeconds;
  return Math.max(0, Math.min(call.leaseSeconds, call.deadline - nowSeconds));
}

/** How one kind of caller (HTTP, RPC, a function) plugs into the protocol. */
export interface ProtectedWork<T> {
  /** How the call came in (`http`, `rpc`, `function`, `method`, a batch's source): a label of its metrics. */
  readonly transport?: IdempotencyOutcomeEvent['transport'];
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
  /** How the call came in and what it applies to, for outcome events (asked only while someone listens). */
  origin?(): Omit<CallReport, 'startedMs'>;
}

/**
 * `Retry-After` for a duplicate of a running call: the call's `retryAfterSeconds`, but never past the moment the
 * owner's lease could be taken over. A claim succeeds once `expires_at < now − clockSkewSeconds` (whole seconds), so
 * that moment is `expires_at + clockSkewSeconds + 1`.
 */
export function retryAfterSeconds(
  call: Pick<ProtectedCall, 'retryAfterSeconds' | 'clockSkewSeconds'>,
  owner: IdempotencyRecord,
  nowSeconds: number,
): number {
  const takeover = Math.floor(owner.expiresAt + call.clockSkewSeconds) + 1;
  return Math.max(1, Math.min(call.retryAfterSeconds, takeover - nowSeconds));
}

/**
 * A call with its settings filled from the module's options (`IdempotencyService.call`), inside a Lambda invocation
 * with its deadline. Every call has the same shape: the fields set later (its steps, its transport) start undefined.
 */
export function protectedCall(
  recordKey: string,
  fingerprint: string,
  settings: CallSettings & { partition?: string },
  options: ResolvedIdempotencyOptions,
): ProtectedCall {
  const policy = callPolicy(settings, options);
  const call: ProtectedCall = {
    recordKey,
    partition: settings.partition,
    fingerprint,
    leaseSeconds: policy.leaseSeconds,
    maxLeaseSeconds: policy.maxLeaseSeconds,
    maxCrashedOwners: policy.maxCrashedOwners,
    retryAfterSeconds: policy.retryAfterSeconds,
    ttlSeconds: policy.ttlSeconds,
    waitMs: policy.waitMs,
    clockSkewSeconds: policy.clockSkewSeconds,
    mode: policy.mode,
    version: policy.version,
    onVersionChange: policy.onVersionChange,
    steps: undefined, // set by its journal
    transport: undefined, // its work's, set when it is run
  };
  const deadline = invocationDeadlineSeconds();
  if (deadline !== undefined) call.deadline = deadline;
  return call;
}
