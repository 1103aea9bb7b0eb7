import { CallHandler } from '@nestjs/common';
import { Answer, ClientAnswer } from './client-answer';
import { ContextAdapter, InterceptedCall } from './context-adapter';
import { handlerOutcome } from './handler-probe';

/**
 * Runs what is below `IdempotencyInterceptor` and resolves with the handler's outcome. When an interceptor inside
 * `@Idempotent()` answers while the handler still runs (a timeout), the client gets that answer at once, and the
 * outcome is still the handler's own, awaited to its end (`HandlerProbe`).
 */
export function runHandler(
  call: InterceptedCall,
  adapter: ContextAdapter,
  next: CallHandler,
  answer: ClientAnswer,
): Promise<unknown> {
  return new Promise<unknown>((resolve, reject) => {
    let last: unknown;
    const settle = (outcome: Answer) => {
      const handler = handlerOutcome(call.context);
      if (handler && !handler.settled) {
        answer.sendEarly(outcome);
        handler.result.then(resolve, reject);
      } else if ('error' in outcome) reject(outcome.error);
      else resolve(outcome.value);
    };
    next.handle().subscribe({
      next: (value) => (last = value),
      error: (error) => settle({ error }),
      complete: () => settle({ value: last }),
    });
  }).then(
    (value) => settledWith(answer, adapter.readResult ? adapter.readResult(value) : value),
    (error) => {
      answer.handlerSettled = true;
      throw error;
    },
  );
}

/** The handler's result, once read (a file is read into memory first): the handler's work has settled. */
function settledWith(answer: ClientAnswer, result: unknown): unknown {
  if (!(result instanceof Promise)) {
    answer.handlerSettled = true;
    return result;
  }
  return result.finally(() => (answer.handlerSettled = true));
}
