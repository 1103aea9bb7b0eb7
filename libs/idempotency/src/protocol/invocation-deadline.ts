import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The deadline of the invocation a call runs in (AWS Lambda), as epoch milliseconds: set around each invocation by
 * `withLambdaContext`, read when a call is described. A claim's lease never ends later, and is not renewed past it.
 */
const invocations = new AsyncLocalStorage<number>();

/** Runs `work` as an invocation that must end by `deadlineMs` (epoch milliseconds). */
export function runBefore<T>(deadlineMs: number, work: () => T): T {
  return invocations.run(deadlineMs, work);
}

/** The current invocation's deadline in epoch seconds (rounded down), or undefined outside one. */
export function invocationDeadlineSeconds(): number | undefined {
  const deadlineMs = invocations.getStore();
  return deadlineMs === undefined ? undefined : Math.floor(deadlineMs / 1000);
}
