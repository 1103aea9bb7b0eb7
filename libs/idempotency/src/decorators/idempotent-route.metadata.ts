import { RequestMethod } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { IdempotentOptions } from '../options/idempotency.options';
import { GRAPHQL_RESOLVER_TYPE_METADATA } from '../nest-internals';

/** The metadata written by `@Idempotent()` on a handler or a controller class, read by `IdempotencyInterceptor`. */
export const IdempotentRoute = Reflector.createDecorator<IdempotentOptions>({ key: 'idempotency:route' });

/** The routes a class-level `@Idempotent()` protects: the ones that change something. */
export const CLASS_PROTECTED_METHODS = new Set<unknown>([
  RequestMethod.POST,
  RequestMethod.PUT,
  RequestMethod.PATCH,
  RequestMethod.DELETE,
]);

/** Whether a resolver method is a GraphQL mutation (`@Mutation()`). */
export function isGraphqlMutation(handler: object): boolean {
  return Reflect.getMetadata(GRAPHQL_RESOLVER_TYPE_METADATA, handler) === 'Mutation';
}
