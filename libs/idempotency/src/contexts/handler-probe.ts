import { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { lastValueFrom, Observable, ReplaySubject } from 'rxjs';

/** The handler's own run in one call, as the probe saw it. */
export interface HandlerOutcome {
  /** True once the handler's result or error is known. */
  settled: boolean;
  /** The handler's last value, or its error. */
  result: Promise<unknown>;
}

const outcomes = new WeakMap<ExecutionContext, HandlerOutcome>();

/**
 * The innermost interceptor of a protected handler that has other interceptors inside `@Idempotent()` (a timeout, a
 * mapper). It subscribes to the handler itself and holds on until the handler settles, whatever the interceptors
 * between it and `IdempotencyInterceptor` do (a timeout that gives up, an unsubscribe): so the interceptor knows when
 * an answer came before the handler's work was done, and what that work produced. Every interceptor of one call is
 * handed the same `ExecutionContext`, which is how the two meet.
 */
export class HandlerProbe implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const results = new ReplaySubject<unknown>(1);
    const outcome: HandlerOutcome = { settled: false, result: lastValueFrom(results, { defaultValue: undefined }) };
    outcome.result.catch(() => undefined); // read by the interceptor when it needs it; never an unhandled rejection
    outcomes.set(context, outcome);
    // Settled before the value travels on, so whoever receives it sees the handler as done.
    next.handle().subscribe({
      next: (value) => results.next(value),
      error: (error) => {
        outcome.settled = true;
        results.error(error);
      },
      complete: () => {
        outcome.settled = true;
        results.complete();
      },
    });
    return results.asObservable();
  }
}

/** The handler's run in this call, when a probe watches it (the route has interceptors inside `@Idempotent()`). */
export function handlerOutcome(context: ExecutionContext): HandlerOutcome | undefined {
  return outcomes.get(context);
}
