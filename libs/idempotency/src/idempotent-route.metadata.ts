import { Reflector } from '@nestjs/core';
import { IdempotentOptions } from './idempotency.options';

/** The route metadata written by `@Idempotent()` and read by `IdempotencyInterceptor`. */
export const IdempotentRoute = Reflector.createDecorator<IdempotentOptions>({ key: 'idempotency:route' });
