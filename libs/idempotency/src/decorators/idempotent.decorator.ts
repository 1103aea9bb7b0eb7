import { applyDecorators, UseFilters, UseInterceptors } from '@nestjs/common';
import { IdempotencyExceptionFilter } from '../contexts/idempotency-exception.filter';
import { IdempotencyInterceptor } from '../contexts/idempotency.interceptor';
import { IdempotentOptions } from '../options/idempotency.options';
import { IdempotentRoute } from './idempotent-route.metadata';

/**
 * Makes a controller method idempotent: the first request with a key runs it, every duplicate gets the
 * stored response. Applies the metadata, the interceptor and the problem+json filter together, so a route
 * can't look protected while it isn't. On a controller class it protects the class's POST, PUT, PATCH and DELETE
 * routes; a method's own `@Idempotent()` options are merged over the class's, field by field.
 *
 * @example
 * ```ts
 * @Post()
 * @Idempotent({ ttlSeconds: 3600 })
 * create(@Body() body: CreateOrder) { ... }
 * ```
 */
export function Idempotent(options: IdempotentOptions = {}): MethodDecorator & ClassDecorator {
  return applyDecorators(
    IdempotentRoute(options),
    UseInterceptors(IdempotencyInterceptor),
    UseFilters(IdempotencyExceptionFilter),
  );
}
