import { applyDecorators, UseFilters, UseInterceptors } from '@nestjs/common';
import { IdempotencyExceptionFilter } from '../contexts/idempotency-exception.filter';
import { IdempotencyInterceptor } from '../contexts/idempotency.interceptor';
import { IdempotentMethodOptions, IdempotentOptions } from '../options/idempotency.options';
import { hintIdempotent } from '../contexts/mcp-results';
import { protectMethodCalls } from './idempotent-method';
import { IdempotentRoute } from './idempotent-route.metadata';

/**
 * Makes a controller method idempotent: the first request with a key runs it, every duplicate gets the
 * stored response. Applies the metadata, the interceptor and the problem+json filter together, so a route
 * can't look protected while it isn't. On a controller class it protects the class's POST, PUT, PATCH and DELETE
 * routes; a method's own `@Idempotent()` options are merged over the class's, field by field.
 *
 * On a method of any other provider (a queue processor, an `@OnEvent` listener, a `@Cron` job), every call runs
 * under the protocol, keyed by `key`, a function of the method's arguments (docs/queues-and-jobs.md).
 *
 * @example
 * ```ts
 * @Post()
 * @Idempotent({ ttlSeconds: 3600 })
 * create(@Body() body: CreateOrder) { ... }
 *
 * @OnEvent('order.paid')
 * @Idempotent({ key: (event: OrderPaid) => event.paymentId })
 * async ship(event: OrderPaid) { ... }
 * ```
 */
export function Idempotent(options?: IdempotentOptions): MethodDecorator & ClassDecorator;
export function Idempotent<A extends any[]>(options: IdempotentMethodOptions<A>): MethodDecorator;
export function Idempotent(
  options: IdempotentOptions | IdempotentMethodOptions = {},
): MethodDecorator & ClassDecorator {
  return applyDecorators(
    (target: object, name?: string | symbol, descriptor?: PropertyDescriptor) => {
      if (name === undefined || !descriptor) return;
      protectMethodCalls(target, name, descriptor);
      // Once the class is defined (every decorator of it has run, whatever their order): an MCP tool says it is idempotent.
      queueMicrotask(() => hintIdempotent((target as Record<string | symbol, Function>)[name]));
    },
    IdempotentRoute(options as IdempotentOptions),
    UseInterceptors(IdempotencyInterceptor),
    UseFilters(IdempotencyExceptionFilter),
  );
}
