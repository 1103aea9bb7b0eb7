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
    const failed = (error: unknown) => {
      answer.handlerSettled = true;
      reject(error);
    };
    // The handler's result, once read (a file is read into memory first): the handler's work has settled then.
    const succeeded = (value: unknown) => {
      let result: unknown;
      try {
        result = adapter.readResult ? adapter.readResult(value) : value;
      } catch (error) {
        return failed(error);
      }
      if (!(result instanceof Promise)) {
        answer.handlerSettled = true;
        return resolve(result);
      }
      resolve(result.finally(() => (answer.handlerSettled = true)));
    };
    let last: unknown;
    const settle = (outcome: Answer) => {
      const handler = handlerOutcome(call.context);
      if (handler && !handler.settled) {
        answer.sendEarly(outcome);
        handler.result.then(succeeded, failed);
      } else if ('error' in outcome) failed(outcome.error);
      else succeeded(outcome.value);
    };
    next.handle().subscribe({
      next: (value) => (last = value),
      error: (error) => settle({ error }),
      complete: () => settle({ value: last }),
    });
  });
}
