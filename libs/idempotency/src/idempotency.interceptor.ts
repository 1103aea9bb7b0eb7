import { CallHandler, ExecutionContext, Inject, Injectable, Logger, NestInterceptor, StreamableFile } from '@nestjs/common';
import { HttpAdapterHost, ModuleRef, Reflector } from '@nestjs/core';
import { defer, lastValueFrom, Observable } from 'rxjs';
import { applicationConfigOf } from './application-config';
import { ClassSerialization } from './class-serializer';
import { fingerprintRequest, fingerprintValue, recordKey } from './fingerprint';
import { REPLAYED_HEADER } from './idempotency.constants';
import {
  IdempotencyError,
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyProblemException,
} from './idempotency.errors';
import { parseKeyHeader, validateKey } from './idempotency-key';
import { IdempotentOptions, RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from './idempotency.options';
import { StoredResponse } from './idempotency.record';
import { IdempotencyService, ProtectedCall } from './idempotency.service';
import { idempotentOptionsOf } from './idempotent-route.metadata';
import { replayedException, storedException } from './stored-exception';
import { requestVersion, routeTemplate, rpcPattern } from './route-identity';
import { bufferedFile, replayedBody, storableBody, storedResult } from './stored-response.codec';

/** The calls an `IdempotencyInterceptor` has seen (Nest hands every interceptor of one call the same context). */
const intercepted = new WeakSet<ExecutionContext>();

/**
 * Puts `@Idempotent()` handlers under the idempotency protocol (`IdempotencyService.run`): HTTP routes keyed by
 * the `Idempotency-Key` header (or the route's `key` function), message handlers by their `key` function.
 * Over HTTP, every protocol error becomes an `application/problem+json` response.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly serialization: ClassSerialization;
  private readonly logger = new Logger('Idempotency');
  /** Each handler's options (its own over its class's), worked out once. Null: not protected. */
  private readonly routes = new WeakMap<Function, IdempotentOptions | null>();
  /** Handlers already warned that their keys are shared across authenticated callers. */
  private readonly unscopedWarned = new WeakSet<Function>();

  constructor(
    private readonly reflector: Reflector,
    private readonly service: IdempotencyService,
    private readonly adapterHost: HttpAdapterHost,
    private readonly moduleRef: ModuleRef,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {
    this.serialization = new ClassSerialization(reflector, moduleRef);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    // Bound on both the class and the method (or also globally), it runs more than once per call: only the first counts.
    if (intercepted.has(context)) return next.handle();
    intercepted.add(context);
    const route = this.routeOptions(context);
    if (route && context.getType() === 'http') return defer(() => this.handleHttp(context, next, route));
    if (route && context.getType() === 'rpc') return defer(() => this.handleMessage(context, next, route));
    if (route && context.getType<string>() === 'graphql') return defer(() => this.handleMutation(context, next, route));
    return next.handle();
  }

  private routeOptions(context: ExecutionContext): IdempotentOptions | undefined {
    const handler = context.getHandler();
    let route = this.routes.get(handler);
    if (route === undefined) {
      route = idempotentOptionsOf(this.reflector, handler, context.getClass()) ?? null;
      this.routes.set(handler, route);
    }
    return route ?? undefined;
  }

  /** `storeIf` of the route, else of the module: whether an outcome is stored and replayed. */
  private isFinal(route: IdempotentOptions): (stored: StoredResponse, error?: unknown) => boolean {
    const storeIf = route.storeIf ?? this.options.storeIf;
    return (stored, error) => storeIf(stored.statusCode, error);
  }

  private async handleHttp(context: ExecutionContext, next: CallHandler, route: IdempotentOptions): Promise<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest();
    const response = http.getResponse();
    try {
      return await this.service.run({
        describe: () => this.describeHttp(context, request, route),
        execute: async () => {
          const body = await lastValueFrom(next.handle(), { defaultValue: undefined });
          // A file is read once, to be both sent and stored.
          return body instanceof StreamableFile ? bufferedFile(body) : body;
        },
        capture: (body) => this.capture(response, body, context),
        captureError: (error) => storedException(error, { headers: this.replayableHeaders(response) }),
        isFinal: this.isFinal(route),
        replay: (stored) => this.replay(response, stored),
      });
    } catch (error) {
      if (error instanceof IdempotencyError) throw IdempotencyProblemException.from(error, this.options.keyHeader);
      throw error;
    }
  }

  /**
   * Message handlers (`@EventPattern`, `@MessagePattern`): the key comes from the message. Protocol errors reach
   * the client as an `RpcException` carrying the same problem body as over HTTP.
   */
  private async handleMessage(context: ExecutionContext, next: CallHandler, route: IdempotentOptions): Promise<unknown> {
    try {
      return await this.runMessage(context, next, route);
    } catch (error) {
      if (!(error instanceof IdempotencyError)) throw error;
      // Only loaded here: an rpc context means the application has @nestjs/microservices.
      const { RpcException } = require('@nestjs/microservices') as typeof import('@nestjs/microservices');
      throw new RpcException(IdempotencyProblemException.from(error).problem);
    }
  }

  private runMessage(context: ExecutionContext, next: CallHandler, route: IdempotentOptions): Promise<unknown> {
    const data = context.switchToRpc().getData();
    return this.service.run({
      describe: () => {
        const key = route.key ? derivedKey(() => route.key!(data, context)) : undefined;
        if (key === undefined) {
          if (route.required === false) return undefined;
          throw new IdempotencyKeyMissingError('This message handler is idempotent; its key function found no key.');
        }
        const pattern = rpcPattern(context);
        const fingerprint = fingerprintValue(['RPC', pattern, data]);
        const scope = this.scopeOf(route, context, undefined, `RPC ${pattern}`);
        return this.service.call(recordKey(`RPC ${pattern}`, scope, key), fingerprint, route);
      },
      execute: () => lastValueFrom(next.handle(), { defaultValue: undefined }),
      capture: storedResult,
      captureError: (error) => storedException(error, { rpc: true }),
      isFinal: this.isFinal(route),
      replay: (stored) => {
        if (stored.exception) throw replayedException(stored);
        return replayedBody(stored);
      },
    });
  }

  /**
   * GraphQL mutations (resolvers under `@nestjs/graphql`): the key from the `Idempotency-Key` header of the GraphQL
   * request, or from an argument (`keyFrom: { arg }`); the fingerprint from the field and its arguments; the result
   * replayed as the resolver's return value. Protocol errors become `GraphQLError`s with `extensions.code`.
   */
  private async handleMutation(context: ExecutionContext, next: CallHandler, route: IdempotentOptions): Promise<unknown> {
    const [, args, graphqlContext, info] = context.getArgs() as [unknown, Record<string, unknown>, GraphqlContext | undefined, { fieldName: string; parentType: { name: string } }];
    const request = graphqlContext?.req;
    try {
      return await this.service.run({
        describe: () => {
          const key = this.mutationKey(route, args, request, context);
          if (key === undefined) {
            if (route.required === false) return undefined;
            throw new IdempotencyKeyMissingError();
          }
          const field = `${info.parentType.name}.${info.fieldName}`;
          const scope = this.scopeOf(route, context, request, `GraphQL ${field}`);
          return this.service.call(recordKey(`GraphQL ${field}`, scope, key), fingerprintValue(['GraphQL', field, args]), route);
        },
        execute: () => lastValueFrom(next.handle(), { defaultValue: undefined }),
        capture: storedResult,
        captureError: (error) => storedException(error),
        isFinal: this.isFinal(route),
        replay: (stored) => {
          const response = graphqlContext?.res ?? request?.res;
          response?.setHeader?.(REPLAYED_HEADER, 'true');
          if (stored.exception) throw replayedException(stored);
          return replayedBody(stored);
        },
      });
    } catch (error) {
      if (error instanceof IdempotencyError) throw graphqlError(IdempotencyProblemException.from(error, this.options.keyHeader));
      throw error;
    }
  }

  private mutationKey(route: IdempotentOptions, args: Record<string, unknown>, request: any, context: ExecutionContext): string | undefined {
    if (route.keyFrom) return derivedKey(() => route.keyFrom!.arg.split('.').reduce<any>((value, name) => value?.[name], args));
    if (route.key) return derivedKey(() => route.key!(args, context));
    return parseKeyHeader(request?.headers?.[this.options.keyHeader.toLowerCase()]);
  }

  /** The caller's scope for a request (the route's function, else the module's), warning when keys are shared. */
  private scopeOf(route: IdempotentOptions, context: ExecutionContext, request: any, where: string): string | undefined {
    const scope = route.scope ?? this.options.scope;
    if (scope === undefined && request?.user !== undefined && request?.user !== null) this.warnUnscoped(context, where);
    return scope ? scope(context) : undefined;
  }

  /** Key, scope, route and fingerprint of an HTTP request; undefined when an optional key is absent. */
  private describeHttp(context: ExecutionContext, request: any, route: IdempotentOptions): ProtectedCall | undefined {
    const key = this.readKey(request, context, route);
    if (key === undefined) {
      if (route.required === false) return undefined;
      throw new IdempotencyKeyMissingError();
    }
    const method = String(this.adapterHost.httpAdapter.getRequestMethod(request)).toUpperCase();
    const version = requestVersion(context, request, applicationConfigOf(this.moduleRef)?.getVersioning());
    const template = version === undefined ? routeTemplate(context) : `${routeTemplate(context)} version=${version}`;
    const scope = this.scopeOf(route, context, request, `${method} ${template}`);
    const fingerprint = fingerprintRequest({
      method,
      route: template,
      params: request.params,
      query: request.query,
      body: request.body,
    });
    return this.service.call(recordKey(`${method} ${template}`, scope, key), fingerprint, route);
  }

  private warnUnscoped(context: ExecutionContext, route: string): void {
    if (this.unscopedWarned.has(context.getHandler())) return;
    this.unscopedWarned.add(context.getHandler());
    this.logger.warn(
      `${route}: requests carry an authenticated user (req.user) but no scope is configured, so every caller shares one ` +
        "key space and a user who sends another user's key gets that user's response. Set scope, e.g. " +
        '(context) => context.switchToHttp().getRequest().user.id, or scope: false when keys are unique by construction.',
    );
  }

  private readKey(request: any, context: ExecutionContext, route: IdempotentOptions): string | undefined {
    if (!route.key) return parseKeyHeader(request.headers?.[this.options.keyHeader.toLowerCase()]);
    return derivedKey(() => route.key!(request, context));
  }

  /** The response as the client received it: status, allow-listed headers and the body as the platform sends it. */
  private capture(response: unknown, body: unknown, context: ExecutionContext): StoredResponse {
    let stored: Omit<StoredResponse, 'statusCode' | 'headers'>;
    try {
      stored = storableBody(this.serialization.asSent(body, context));
    } catch {
      stored = { bodyOmitted: true }; // the serializer threw: the client got an error from it, the work is done
    }
    return { statusCode: (response as { statusCode: number }).statusCode, headers: this.replayableHeaders(response), ...stored };
  }

  /** The allow-listed headers the response carries so far. */
  private replayableHeaders(response: unknown): Record<string, string> {
    const adapter = this.adapterHost.httpAdapter;
    const headers: Record<string, string> = {};
    for (const name of this.options.replayHeaders) {
      const value = adapter.getHeader(response, name);
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
    }
    return headers;
  }

  /**
   * A duplicate gets the stored status, headers and body, marked `Idempotent-Replayed: true`. A stored error is thrown
   * again, so the app's exception filters answer it exactly as they answered the first request.
   */
  private replay(response: unknown, stored: StoredResponse): unknown {
    const adapter = this.adapterHost.httpAdapter;
    for (const [name, value] of Object.entries(stored.headers)) adapter.setHeader(response, name, value);
    adapter.setHeader(response, REPLAYED_HEADER, 'true');
    if (stored.exception) throw replayedException(stored);
    adapter.status(response, stored.statusCode);
    return replayedBody(stored);
  }
}

/** What the GraphQL context holds for an HTTP transport: the request (and, on Express, the response). */
interface GraphqlContext {
  req?: any;
  res?: { setHeader?(name: string, value: string): void };
}

/**
 * A problem as a GraphQL error: `extensions.code` is `IDEMPOTENCY_` and the problem's name (`IDEMPOTENCY_IN_FLIGHT`),
 * next to the problem's `type`, `status` and, for a 409 in flight, `retryAfter` seconds. `graphql` is loaded only
 * here: a GraphQL context means the application has it.
 */
function graphqlError(problem: IdempotencyProblemException): Error {
  const { GraphQLError } = require('graphql') as typeof import('graphql');
  const { type, status, detail, title: _title, ...extra } = problem.problem;
  const code = `IDEMPOTENCY_${type.split(':').pop()!.toUpperCase().replace(/-/g, '_')}`;
  const retryAfter = problem.headers['Retry-After'];
  return new GraphQLError(detail, {
    extensions: { code, type, status, ...extra, ...(retryAfter ? { retryAfter: Number(retryAfter) } : {}) },
    originalError: problem,
  });
}

/** A key from the route's `key` function: one that throws is an invalid key (400), never a raw error. */
function derivedKey(derive: () => unknown): string | undefined {
  let derived: unknown;
  try {
    derived = derive();
  } catch {
    throw new IdempotencyKeyInvalidError('it could not be derived from the request');
  }
  return validateKey(derived);
}
