/**
 * Every deep `@nestjs/*` import of the library, and every reach into Nest's own objects, in one place: what to review
 * on a Nest upgrade. Nest 11 and 12 are tested (`npm run test:package`).
 */
import type { ApplicationConfig, ModuleRef } from '@nestjs/core';

export {
  HTTP_CODE_METADATA,
  INTERCEPTORS_METADATA,
  METHOD_METADATA,
  PARAMTYPES_METADATA,
  PATH_METADATA,
  PROPERTY_DEPS_METADATA,
  RESPONSE_PASSTHROUGH_METADATA,
  ROUTE_ARGS_METADATA,
  SELF_DECLARED_DEPS_METADATA,
  SSE_METADATA,
  VERSION_METADATA,
} from '@nestjs/common/constants';
export { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
export { CLASS_SERIALIZER_OPTIONS } from '@nestjs/common/serializer/class-serializer.constants';
export type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
export { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';

/** What `@MessagePattern()` / `@EventPattern()` of `@nestjs/microservices` write on a handler (read without importing it). */
export const MESSAGE_PATTERN_METADATA = 'microservices:pattern';
/** What `@SubscribeMessage()` of `@nestjs/websockets` writes on a gateway handler. */
export const WEBSOCKET_MESSAGE_METADATA = 'message';
/** What `@Mutation()`, `@Query()`, `@ResolveField()` … of `@nestjs/graphql` write on a resolver method (and `@Resolver()` on its class). */
export const GRAPHQL_RESOLVER_TYPE_METADATA = 'graphql:resolver_type';

/**
 * The application's global settings (global interceptors, versioning). Nest does not offer them as a provider;
 * every `ModuleRef` holds the container that has them (Nest 10 to 12). Undefined if that ever changes, and then
 * the callers fall back to what the route's own metadata says.
 */
export function applicationConfigOf(moduleRef: ModuleRef): ApplicationConfig | undefined {
  return (moduleRef as unknown as { container?: { applicationConfig?: ApplicationConfig } }).container
    ?.applicationConfig;
}
