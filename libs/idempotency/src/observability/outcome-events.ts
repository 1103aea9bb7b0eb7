import { channel } from 'node:diagnostics_channel';
import { Logger } from '@nestjs/common';
import { IdempotencyOutcomeEvent, outcomeEventName, PROBLEMS, RequestOutcome } from '../errors/outcomes';

/** The `node:diagnostics_channel` channel every protected call's outcome is published on, while it has subscribers. */
export const OUTCOME_CHANNEL = 'nestjs-dynamodb-idempotency:outcome';
const outcomeChannel = channel(OUTCOME_CHANNEL);

/** A hook that throws is logged at most this often: it never changes an answer, and never floods the log. */
const HOOK_ERROR_LOG_INTERVAL_MS = 60_000;

/** Where a call came from and when it started: kept on the call only while someone listens for outcome events. */
export interface CallReport {
  transport: IdempotencyOutcomeEvent['transport'];
  operation: string;
  /** The route's mode, for a call that ends before it is described (a missing key). */
  mode?: IdempotencyOutcomeEvent['mode'];
  startedMs: number;
}

/** The part of a call an outcome event reads. */
export interface ReportedCall {
  /** How the call came in (`idempotency_requests_total`'s `transport`); `function` when unsaid. */
  transport?: IdempotencyOutcomeEvent['transport'];
  recordKey?: string;
  partition?: string;
  mode?: IdempotencyOutcomeEvent['mode'];
  report?: CallReport;
}

/**
 * One event per protected call, to the module's `onOutcome` hook and the diagnostics channel. Nothing is built while
 * neither listens: a call carries a `report` only if one did when it started.
 */
export class OutcomeEvents {
  private static readonly logger = new Logger('Idempotency');
  hook?: (event: IdempotencyOutcomeEvent) => void;
  private lastHookErrorMs = -Infinity;

  /** A call's report, if anyone listens now. `origin` is asked only then. */
  report(origin: () => Omit<CallReport, 'startedMs'> | undefined): CallReport | undefined {
    if (this.hook === undefined && !outcomeChannel.hasSubscribers) return undefined;
    const from = origin();
    return from && { ...from, startedMs: performance.now() };
  }

  publish(outcome: RequestOutcome, call: ReportedCall | undefined, statusCode?: number): void {
    const report = call?.report;
    if (!report) return;
    const event: IdempotencyOutcomeEvent = {
      outcome: outcomeEventName(outcome),
      transport: report.transport,
      operation: report.operation,
      durationMs: performance.now() - report.startedMs,
      mode: call.mode ?? report.mode ?? 'lease',
    };
    if (call.recordKey !== undefined) event.recordKey = call.recordKey;
    if (call.partition !== undefined) event.partition = call.partition;
    const status =
      statusCode ?? (outcome === 'executed' || outcome === 'replayed' ? undefined : PROBLEMS[outcome].status);
    if (status !== undefined) event.statusCode = status;
    if (outcomeChannel.hasSubscribers) {
      for (const subscriber of channelSubscribers())
        this.callHook('a subscriber of the outcome channel', subscriber, event);
    }
    if (this.hook) this.callHook('the onOutcome hook', this.hook, event);
  }

  /**
   * Calls a listener the application gave; what it throws or its promise rejects with is logged, at most once a minute
   * (for every listener together), and never reaches the answer or the process.
   */
  private callHook(who: string, hook: OutcomeListener, event: IdempotencyOutcomeEvent): void {
    const failed = (error: unknown) => this.logHookError(who, event, error);
    try {
      const returned = hook(event, OUTCOME_CHANNEL) as unknown;
      if (isThenable(returned)) returned.then(undefined, failed);
    } catch (error) {
      failed(error);
    }
  }

  private logHookError(who: string, event: IdempotencyOutcomeEvent, error: unknown): void {
    const now = performance.now();
    if (now - this.lastHookErrorMs < HOOK_ERROR_LOG_INTERVAL_MS) return;
    this.lastHookErrorMs = now;
    OutcomeEvents.logger.error({
      msg: `${who} failed; the answer is unchanged (listener errors are logged at most once a minute)`,
      operation: event.operation,
      error: String(error),
    });
  }
}

type OutcomeListener = (event: IdempotencyOutcomeEvent, name: string) => unknown;

/**
 * An operator's command as an outcome event on the diagnostics channel (`IdempotencyAdmin`'s step surgery), while it
 * has subscribers: each called on its own, what one throws logged, never reaching the command.
 */
export function publishOperatorEvent(event: () => IdempotencyOutcomeEvent): void {
  if (!outcomeChannel.hasSubscribers) return;
  const built = event();
  for (const subscriber of channelSubscribers()) {
    try {
      const returned = subscriber(built, OUTCOME_CHANNEL) as unknown;
      if (isThenable(returned)) returned.then(undefined, (error: unknown) => logListenerError(built, error));
    } catch (error) {
      logListenerError(built, error);
    }
  }
}

function logListenerError(event: IdempotencyOutcomeEvent, error: unknown): void {
  new Logger('Idempotency').error({
    msg: 'a subscriber of the outcome channel failed on an operator event',
    operation: event.operation,
    error: String(error),
  });
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/**
 * The channel's subscribers, called one by one so that one that throws or rejects is caught here: the channel's own
 * `publish` rethrows a subscriber's error as an uncaught exception, which ends the process. Node 20 to 24 keep them in
 * `_subscribers`; should a later Node not, they are called through `publish` (a throwing subscriber then is Node's).
 */
function channelSubscribers(): OutcomeListener[] {
  const subscribers = (outcomeChannel as unknown as { _subscribers?: unknown })._subscribers;
  if (Array.isArray(subscribers)) return [...(subscribers as OutcomeListener[])];
  return [(event) => outcomeChannel.publish(event)];
}
