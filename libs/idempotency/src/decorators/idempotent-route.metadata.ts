import { RequestMethod } from '@nestjs/common';
import { METHOD_METADATA } from '@nestjs/common/constants';
import { Reflector } from '@nestjs/core';
import { IdempotentOptions } from '../options/idempotency.options';

/** The metadata written by `@Idempotent()` on a handler or a controller class, read by `IdempotencyInterceptor`. */
export const IdempotentRoute = Reflector.createDecorator<IdempotentOptions>({ key: 'idempotency:route' });

/** The routes a class-level `@Idempotent()` protects: the ones that change something. */
const CLASS_PROTECTED_METHODS = new Set<unknown>([RequestMethod.POST, RequestMethod.PUT, RequestMethod.PATCH, RequestMethod.DELETE]);

/** What `@Mutation()`, `@Query()`, `@ResolveField()` … of `@nestjs/graphql` write on a resolver method (and `@Resolver()` on its class). */
export const GRAPHQL_RESOLVER_TYPE_METADATA = 'graphql:resolver_type';

/** Whether a resolver method is a GraphQL mutation (`@Mutation()`). */
export function isGraphqlMutation(handler: object): boolean {
  return Reflect.getMetadata(GRAPHQL_RESOLVER_TYPE_METADATA, handler) === 'Mutation';
}

/** Whether a class-level `@Idempotent()` covers this handler: a POST, PUT, PATCH or DELETE route, or a GraphQL mutation. */
function changesSomething(handler: Function): boolean {
  return CLASS_PROTECTED_METHODS.has(Reflect.getMetadata(METHOD_METADATA, handler)) || isGraphqlMutation(handler);
}

/**
 * The options a handler runs under, or undefined when it is not protected: its own `@Idempotent()` options merged field
 * by field over its class's. A class-level `@Idempotent()` protects a controller's POST, PUT, PATCH and DELETE routes
 * and a resolver's mutations; a handler's own decorator protects it whatever it is.
 */
export function idempotentOptionsOf(reflector: Reflector, handler: Function, type: Function): IdempotentOptions | undefined {
  const own = reflector.get(IdempotentRoute, handler);
  const inherited = reflector.get(IdempotentRoute, type);
  if (!inherited) return own;
  if (!own && !changesSomething(handler)) return undefined;
  const merged: IdempotentOptions = { ...inherited };
  for (const [name, value] of Object.entries(own ?? {})) if (value !== undefined) (merged as Record<string, unknown>)[name] = value;
  return merged;
}
