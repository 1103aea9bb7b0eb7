import { runBefore } from '../protocol/invocation-deadline';

/** What the module reads of a Lambda context: the time left (`aws-lambda`'s `Context` has it). */
export interface LambdaContextLike {
  /** Milliseconds until the invocation times out. */
  getRemainingTimeInMillis(): number;
}

/**
 * Wraps an async Lambda handler so that every idempotent call it makes knows the invocation's deadline: a claim's
 * lease then ends no later than the deadline (plus `clockSkewSeconds` before another may take it over), so a
 * timed-out invocation frees its key right after the deadline, and a lease is never renewed past it.
 *
 * @example
 * ```ts
 * export const handler = withLambdaContext(async (event, context) => (await proxy)(event, context));
 * ```
 */
export function withLambdaContext<E, C extends LambdaContextLike, R>(
  handler: (event: E, context: C) => Promise<R>,
): (event: E, context: C) => Promise<R> {
  return (event, context) => runBefore(Date.now() + context.getRemainingTimeInMillis(), () => handler(event, context));
}
