import { Injectable, OnModuleInit } from '@nestjs/common';
import { METHOD_METADATA, RESPONSE_PASSTHROUGH_METADATA, ROUTE_ARGS_METADATA, SSE_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { validateCallSettings } from './idempotency.options';
import { GRAPHQL_RESOLVER_TYPE_METADATA, idempotentOptionsOf, IdempotentRoute, isGraphqlMutation } from './idempotent-route.metadata';

/** Metadata keys of other Nest packages, read without importing them. */
const MESSAGE_PATTERN_METADATA = 'microservices:pattern';
const WEBSOCKET_MESSAGE_METADATA = 'message';

/**
 * Checks every `@Idempotent()` handler once, at startup: a handler whose answer cannot be replayed faithfully, or
 * that is not an HTTP route or message handler, and every invalid route option, fails application startup with a
 * message naming the handler. Never a route that looks protected while it is not, never a 500 on each request.
 */
@Injectable()
export class IdempotentRoutesCheck implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
  ) {}

  onModuleInit(): void {
    const problems = [
      ...this.discovery.getControllers().flatMap((wrapper) => this.check(wrapper, true)),
      ...this.discovery.getProviders().flatMap((wrapper) => this.check(wrapper, false)),
    ];
    if (problems.length > 0) throw new Error(`Invalid @Idempotent() usage:\n- ${problems.join('\n- ')}`);
  }

  private check(wrapper: InstanceWrapper, isController: boolean): string[] {
    const prototype = prototypeOf(wrapper);
    if (!prototype) return [];
    const type = prototype.constructor;
    if (!isController && this.reflector.get(IdempotentRoute, type) && !Reflect.hasMetadata(GRAPHQL_RESOLVER_TYPE_METADATA, type)) {
      return [
        `${type.name}: @Idempotent() on a class protects a controller's POST, PUT, PATCH and DELETE routes or a resolver's mutations; this is neither`,
      ];
    }
    return this.scanner.getAllMethodNames(prototype).flatMap((name) => {
      const handler = prototype[name];
      const options = idempotentOptionsOf(this.reflector, handler, type);
      if (!options) return [];
      const where = `${type.name}.${name}`;
      const problem = isController ? this.handlerProblem(prototype, name, handler) : providerProblem(handler);
      if (problem) return [`${where}: ${problem}`];
      try {
        validateCallSettings(options, where);
      } catch (error) {
        return [(error as Error).message];
      }
      if (options.keyFrom && !isGraphqlMutation(handler)) {
        return [`${where}: keyFrom: { arg } reads a GraphQL mutation's arguments; use key: (request) => … here`];
      }
      return [];
    });
  }

  private handlerProblem(prototype: object, name: string, handler: object): string | undefined {
    if (Reflect.hasMetadata(MESSAGE_PATTERN_METADATA, handler)) return undefined;
    if (!Reflect.hasMetadata(METHOD_METADATA, handler)) {
      return 'not a route or message handler, so nothing would call it through the idempotency interceptor';
    }
    if (Reflect.getMetadata(SSE_METADATA, handler)) {
      return '@Sse() routes stream events and cannot be replayed; remove @Idempotent() from it';
    }
    const args: Record<string, unknown> = Reflect.getMetadata(ROUTE_ARGS_METADATA, prototype.constructor, name) ?? {};
    const passthrough = Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, prototype.constructor, name);
    for (const key of Object.keys(args)) {
      const type = Number(key.split(':')[0]);
      if (type === RouteParamtypes.NEXT) return '@Next() hands the response to other code, so it cannot be stored';
      if (type === RouteParamtypes.RESPONSE && !passthrough) {
        return '@Res() without passthrough writes the response itself, so it cannot be stored or replayed; use @Res({ passthrough: true }) and return the body';
      }
    }
    return undefined;
  }
}

function providerProblem(handler: object): string | undefined {
  if (Reflect.hasMetadata(WEBSOCKET_MESSAGE_METADATA, handler)) return 'WebSocket gateway handlers are not supported';
  if (isGraphqlMutation(handler)) return undefined;
  const resolverType = Reflect.getMetadata(GRAPHQL_RESOLVER_TYPE_METADATA, handler);
  if (resolverType !== undefined) {
    return `a GraphQL ${resolverType === 'Query' || resolverType === 'Subscription' ? resolverType.toLowerCase() : 'field resolver'} cannot be @Idempotent(): only mutations change something (a query is safe to repeat, a subscription is a stream)`;
  }
  return 'only controller routes and message handlers can be @Idempotent(); use IdempotencyService.execute() elsewhere';
}

/** The class whose methods a wrapper exposes: its instance's, or its class's for request-scoped providers. */
function prototypeOf(wrapper: InstanceWrapper): Record<string, any> | undefined {
  const { instance, metatype, inject } = wrapper;
  if (instance && typeof instance === 'object') return Object.getPrototypeOf(instance);
  if (typeof metatype === 'function' && !inject) return metatype.prototype;
  return undefined;
}
