import { Logger } from '@nestjs/common';
import { runBefore } from '../protocol/invocation-deadline';

/** What the module reads of a Lambda context: the time left and the request id (`aws-lambda`'s `Context` has both). */
export interface LambdaContextLike {
  /** Milliseconds until the invocation times out. */
  getRemainingTimeInMillis(): number;
  /** The invocation's request id: a claim made in it names its holder `lambda:<id>` (`keys:inspect`). */
  awsRequestId?: string;
}

let warnedNoDeadline = false;

/**
 * Wraps an async Lambda handler so that every idempotent call it makes knows the invocation's deadline: a claim's
 * lease then ends no later than the deadline (plus `clockSkewSeconds` before another may take it over), so a
 * timed-out invocation frees its key right after the deadline, and a lease is never renewed past it.
 *
 * The invocation ends (its promise resolves with the handler's response) only once every protected call it started
 * has settled, bounded by the deadline: Lambda freezes a container as soon as its handler resolves, so a call whose
 * client was answered early (a timeout interceptor) would otherwise leave its claim PENDING until the lease ran out,
 * and a retry would run the handler again.
 *
 * A context without a finite `getRemainingTimeInMillis()` (a test's `{}`, a local runner) gets ordinary leases and
 * one warning.
 *
 * @example
 * ```ts
 * export const handler = withLambdaContext(async (event, context) => (await proxy)(event, context));
 * ```
 */
export function withLambdaContext<E, C extends LambdaContextLike, R>(
  handler: (event: E, context: C) => Promise<R>,
): (event: E, context: C) => Promise<R> {
  return (event, context) => runBefore(deadlineOf(context), () => handler(event, context), holderOf(context));
}

/** Which invocation holds the claims made in it: `lambda:<awsRequestId>`, when the context has one. */
function holderOf(context: Partial<LambdaContextLike> | undefined): string | undefined {
  const id = context?.awsRequestId;
  return typeof id === 'string' && id !== '' ? `lambda:${id.slice(0, 100)}` : undefined;
}

/** The invocation's deadline in epoch milliseconds, or `Infinity` when the context does not tell. */
function deadlineOf(context: Partial<LambdaContextLike> | undefined): number {
  let remainingMs: unknown;
  try {
    remainingMs = context?.getRemainingTimeInMillis?.();
  } catch {
    remainingMs = undefined;
  }
  if (typeof remainingMs === 'number' && Number.isFinite(remainingMs)) return Date.now() + remainingMs;
  if (!warnedNoDeadline) {
    warnedNoDeadline = true;
    new Logger('Idempotency').warn(
      'withLambdaContext: the context has no finite getRemainingTimeInMillis(); leases are not cut at the invocation’s deadline',
    );
  }
  return Infinity;
}
