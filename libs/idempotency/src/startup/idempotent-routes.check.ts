import { Inject, Injectable, Logger, OnModuleInit, RequestMethod } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { interceptorsInside } from '../contexts/handler-probe.installer';
import { MCP_READS, MCP_TOOL_METADATA } from '../contexts/mcp-results';
import { IdempotentOptions } from '../options/idempotency.options';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { validateCallSettings } from '../options/option-checks';
import { IdempotentRoute, isGraphqlMutation } from '../decorators/idempotent-route.metadata';
import { idempotentOptionsOf } from '../options/route-settings';
import { OperationNames } from './operation-names';
import { checkOutcomeDoors, FoundDoor } from './outcome-doors.check';
import { readDoor } from '../decorators/idempotent-outcome.decorator';
import { OutcomeDoors } from '../contexts/outcome-door.interceptor';
import {
  GRAPHQL_RESOLVER_TYPE_METADATA,
  InstanceWrapper,
  MESSAGE_PATTERN_METADATA,
  METHOD_METADATA,
  RESPONSE_PASSTHROUGH_METADATA,
  ROUTE_ARGS_METADATA,
  RouteParamtypes,
  SSE_METADATA,
  WEBSOCKET_MESSAGE_METADATA,
} from '../nest-internals';

/**
 * Checks every `@Idempotent()` handler once, at startup: a handler whose answer cannot be replayed faithfully, a
 * provider method without a key function, and every invalid route option, fails application startup with a
 * message naming the handler. Never a route that looks protected while it is not, never a 500 on each request.
 */
@Injectable()
export class IdempotentRoutesCheck implements OnModuleInit {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly doors: OutcomeDoors,
  ) {}

  onModuleInit(): void {
    const operations = new OperationNames(this.options.layout);
    const problems = [
      ...this.discovery.getControllers().flatMap((wrapper) => this.check(wrapper, true, operations)),
      ...this.discovery.getProviders().flatMap((wrapper) => this.check(wrapper, false, operations)),
    ];
    problems.push(...operations.problems());
    problems.push(...checkOutcomeDoors(this.foundDoors(), operations, this.options, this.doors));
    if (problems.length > 0) throw new Error(`Invalid @Idempotent() usage:\n- ${problems.join('\n- ')}`);
  }

  private check(wrapper: InstanceWrapper, isController: boolean, operations: OperationNames): string[] {
    const prototype = prototypeOf(wrapper);
    if (!prototype) return [];
    const type = prototype.constructor;
    if (
      !isController &&
      this.reflector.get(IdempotentRoute, type) &&
      !Reflect.hasMetadata(GRAPHQL_RESOLVER_TYPE_METADATA, type)
    ) {
      return [
        `${type.name}: @Idempotent() on a class protects a controller's POST, PUT, PATCH and DELETE routes or a resolver's mutations; this is neither`,
      ];
    }
    return this.scanner.getAllMethodNames(prototype).flatMap((name) => {
      const handler = prototype[name];
      // What an override reaches through `super`, protected or not itself.
      const overridden = isController ? [] : this.addOverridden(prototype, name, handler, operations);
      const options = idempotentOptionsOf(this.reflector, handler, type);
      if (!options) return overridden;
      const where = `${type.name}.${name}`;
      const problem = isController
        ? this.handlerProblem(prototype, name, handler, wrapper)
        : providerProblem(handler, options, wrapper, where);
      if (problem) return [`${where}: ${problem}`];
      try {
        validateCallSettings(options, where, this.options.clockSkewSeconds);
        operations.add(type, name, handler, options, where);
      } catch (error) {
        return [...overridden, (error as Error).message];
      }
      this.warnIfOnePartition(where, options);
      if (options.keyFrom && !isGraphqlMutation(handler) && !Reflect.hasMetadata(MCP_TOOL_METADATA, handler)) {
        return [
          ...overridden,
          `${where}: keyFrom: { arg } reads a GraphQL mutation's or an MCP tool's arguments; use key: (request) => … here`,
        ];
      }
      return overridden;
    });
  }

  /**
   * The protected methods a provider's method overrides, which its `super` calls reach (whether the override is
   * protected or not): operations of the application too, under the provider's class (a base class's method reached by
   * two subclasses is two operations). The problems of their own names.
   */
  private addOverridden(prototype: object, name: string, handler: Function, operations: OperationNames): string[] {
    const type = prototype.constructor;
    const problems: string[] = [];
    for (let base = Object.getPrototypeOf(prototype); base && base !== Object.prototype;) {
      const method: unknown = Object.getOwnPropertyDescriptor(base, name)?.value;
      const options = typeof method === 'function' ? this.reflector.get(IdempotentRoute, method) : undefined;
      if (options && method !== handler) {
        const where = `${(base as object).constructor.name}.${name} (overridden by ${type.name}.${name})`;
        try {
          operations.add(type, name, method as Function, options, where);
        } catch (error) {
          problems.push((error as Error).message);
        }
      }
      base = Object.getPrototypeOf(base);
    }
    return problems;
  }

  /** The handlers of controllers that carry `@IdempotentOutcome()`. */
  private foundDoors(): FoundDoor[] {
    return this.discovery.getControllers().flatMap((wrapper) => {
      const prototype = prototypeOf(wrapper);
      if (!prototype) return [];
      return this.scanner.getAllMethodNames(prototype).flatMap((name) => {
        const handler = prototype[name];
        const door = readDoor(handler);
        return door ? [{ handler, where: `${prototype.constructor.name}.${name}`, door }] : [];
      });
    });
  }

  /** A sort-key layout puts an unscoped route's records in one partition: its writes share that partition's limit. */
  private warnIfOnePartition(where: string, route: IdempotentOptions): void {
    const { layout, scope, partitionKeyValue } = this.options;
    if (!layout.sortKey || (route.scope ?? scope) || (route.partitionKeyValue ?? partitionKeyValue)) return;
    this.logger.warn(
      `${where}: the table has a sort key and this route has no scope, so all its records share one partition ` +
        `(${layout.keyPrefix}unscoped) and its writes share that partition's limit (about 1,000 write units a second). ` +
        'Set scope (the caller), or partitionKeyValue.',
    );
  }

  private handlerProblem(
    prototype: object,
    name: string,
    handler: Function,
    wrapper: InstanceWrapper,
  ): string | undefined {
    if (MCP_READS.some((key) => Reflect.hasMetadata(key, handler))) {
      return 'an MCP resource or prompt is a read, which needs no key; @Idempotent() protects MCP tools (@Tool())';
    }
    if (Reflect.hasMetadata(MESSAGE_PATTERN_METADATA, handler)) return undefined;
    if (!Reflect.hasMetadata(METHOD_METADATA, handler)) {
      return 'not a route or message handler, so nothing would call it through the idempotency interceptor';
    }
    const method = Reflect.getMetadata(METHOD_METADATA, handler);
    if (SAFE_METHODS.has(method)) {
      this.logger.warn(
        `${prototype.constructor.name}.${name}: @Idempotent() on a ${RequestMethod[method]} route. ${RequestMethod[method]} is safe to ` +
          'repeat by HTTP semantics; the decorator makes every such request need a key and replays a stale answer for ' +
          'the whole ttlSeconds. Remove it unless this route really changes something.',
      );
    }
    if (interceptorsInside(prototype.constructor, handler).some((entry) => isUploadInterceptor(entry, wrapper))) {
      return (
        'an upload interceptor (FileInterceptor, FilesInterceptor, …) is bound inside @Idempotent(), so the files and ' +
        'fields would be read after the fingerprint is taken. Bind it before: write @Idempotent() above ' +
        '@UseInterceptors(FileInterceptor(…)), or put the upload interceptor on the controller'
      );
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

/** GET, HEAD and OPTIONS, as `@Get()`, `@Head()` and `@Options()` write them. */
const SAFE_METHODS = new Set<unknown>([RequestMethod.GET, RequestMethod.HEAD, RequestMethod.OPTIONS]);

/**
 * Whether an interceptor reads multipart uploads: the `FileInterceptor` family of `@nestjs/platform-express` keeps a
 * multer instance (`this.multer`), found on the instance Nest made for the controller's module.
 */
function isUploadInterceptor(entry: unknown, wrapper: InstanceWrapper): boolean {
  const instance = typeof entry === 'function' ? wrapper.host?.injectables.get(entry as Function)?.instance : entry;
  return typeof (instance as { multer?: { single?: unknown } } | undefined)?.multer?.single === 'function';
}

function providerProblem(
  handler: object,
  options: IdempotentOptions,
  wrapper: InstanceWrapper,
  where: string,
): string | undefined {
  if (Reflect.hasMetadata(WEBSOCKET_MESSAGE_METADATA, handler)) return 'WebSocket gateway handlers are not supported';
  if (isGraphqlMutation(handler)) return undefined;
  const resolverType = Reflect.getMetadata(GRAPHQL_RESOLVER_TYPE_METADATA, handler);
  if (resolverType !== undefined) {
    return `a GraphQL ${resolverType === 'Query' || resolverType === 'Subscription' ? resolverType.toLowerCase() : 'field resolver'} cannot be @Idempotent(): only mutations change something (a query is safe to repeat, a subscription is a stream)`;
  }
  if (typeof options.key !== 'function') {
    return 'a provider method needs key: (...args) => string, a function of its arguments (there is no Idempotency-Key header), e.g. key: (event) => event.id';
  }
  if (options.name === undefined) {
    const suggestion = where.charAt(0).toLowerCase() + where.slice(1);
    return (
      `a provider method needs name, the operation its records are kept under, unique in the application (e.g. ` +
      `name: '${suggestion}'): a class's runtime name is not a stable identity (mixin(), bundlers and subclasses ` +
      'change it), and two operations that share records answer each other'
    );
  }
  if (!wrapper.isTransient && !wrapper.isDependencyTreeStatic()) {
    return 'a request-scoped provider (or one that depends on one) has no instance before its request; make it a singleton, or call IdempotencyService.execute() inside the method';
  }
  return undefined;
}

/** The class whose methods a wrapper exposes: its instance's, or its class's for request-scoped providers. */
function prototypeOf(wrapper: InstanceWrapper): Record<string, any> | undefined {
  const { instance, metatype, inject } = wrapper;
  if (instance && typeof instance === 'object') return Object.getPrototypeOf(instance);
  if (typeof metatype === 'function' && !inject) return metatype.prototype;
  return undefined;
}
