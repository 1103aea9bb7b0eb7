import { CallHandler, ExecutionContext, Inject, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Observable } from 'rxjs';
import { Answer, ClientAnswer } from './client-answer';
import { ContextAdapter, InterceptedCall } from './context-adapter';
import { GraphqlContextAdapter } from './graphql.context';
import { handlerOutcome } from './handler-probe';
import { HttpContextAdapter } from './http.context';
import { RpcContextAdapter } from './rpc.context';
import { recordKey } from '../keys/fingerprint';
import {
  IdempotencyError,
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyScopeFailedError,
} from '../errors/idempotency.errors';
import { validateKey } from '../keys/idempotency-key';
import { IdempotentOptions } from '../options/idempotency.options';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { IdempotencyService, ProtectedCall } from '../protocol/idempotency.service';
import { idempotentOptionsOf } from '../options/route-settings';

/** The calls an `IdempotencyInterceptor` has seen (Nest hands every interceptor of one call the same context). */
const intercepted = new WeakSet<ExecutionContext>();

/**
 * Puts `@Idempotent()` handlers under the idempotency protocol (`IdempotencyService.run`), whatever their execution
 * type: the adapter for `getType()` says where the key comes from and how outcomes are stored, replayed and refused.
 *
 * The stored outcome is the handler's own: once the key is claimed, the call is seen through to the end of the
 * handler's work even when the client was answered first (a timeout on either side of `@Idempotent()`, a client that
 * went away). The lease is renewed meanwhile, duplicates get 409, and the outcome is stored when the work ends.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  /** Each handler's options (its own over its class's), worked out once. Null: not protected. */
  private readonly routes = new WeakMap<Function, IdempotentOptions | null>();
  /** Handlers already warned that their keys are shared across authenticated callers. */
  private readonly unscopedWarned = new WeakSet<Function>();
  private readonly adapters: Record<string, ContextAdapter>;

  constructor(
    private readonly reflector: Reflector,
    private readonly service: IdempotencyService,
    http: HttpContextAdapter,
    rpc: RpcContextAdapter,
    graphql: GraphqlContextAdapter,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {
    this.adapters = { http, rpc, graphql };
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    // Bound on both the class and the method (or also globally), it runs more than once per call: only the first counts.
    if (intercepted.has(context)) return next.handle();
    intercepted.add(context);
    const route = this.routeOptions(context);
    const adapter = route && this.adapters[context.getType<string>()];
    if (!route || !adapter) return next.handle();
    return this.protect({ context, route }, adapter, next);
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

  /** One protected call: the protocol runs on subscription and to its end, whoever stops listening meanwhile. */
  private protect(call: InterceptedCall, adapter: ContextAdapter, next: CallHandler): Observable<unknown> {
    return new Observable((client) => {
      const answer = new ClientAnswer(client, () => adapter.responseState?.(call));
      let owned = false;
      const storeIf = call.route.storeIf ?? this.options.storeIf;
      this.service
        .run({
          describe: () => this.describe(call, adapter),
          execute: () => {
            owned = true;
            return this.runHandler(call, adapter, next, answer);
          },
          capture: (value) => adapter.capture(value, call, answer.state()),
          captureError: (error) => adapter.captureError(error, call, answer.state()),
          isFinal: (stored, error) => storeIf(stored.statusCode, error),
          replay: (stored) => adapter.replay(stored, call),
        })
        .then(
          (value) => answer.send({ value }),
          (error) => answer.send({ error: error instanceof IdempotencyError ? adapter.problem(error, call) : error }),
        )
        .finally(() => {
          if (owned && (answer.early || adapter.clientGone?.(call))) {
            this.logger.warn({
              msg: 'the client was answered before the handler finished (a timeout, or it went away); the handler’s own outcome is stored and replayed',
              operation: adapter.operation(call),
            });
          }
        });
      return () => answer.abandon();
    });
  }

  /**
   * Runs what is below this interceptor and resolves with the handler's outcome. When an interceptor inside
   * `@Idempotent()` answers while the handler still runs (a timeout), the client gets that answer at once, and the
   * outcome is still the handler's own, awaited to its end.
   */
  private runHandler(
    call: InterceptedCall,
    adapter: ContextAdapter,
    next: CallHandler,
    answer: ClientAnswer,
  ): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => {
      let last: unknown;
      const settle = (outcome: Answer) => {
        const handler = handlerOutcome(call.context);
        if (handler && !handler.settled) {
          answer.sendEarly(outcome);
          handler.result.then(resolve, reject);
        } else if ('error' in outcome) reject(outcome.error);
        else resolve(outcome.value);
      };
      next.handle().subscribe({
        next: (value) => (last = value),
        error: (error) => settle({ error }),
        complete: () => settle({ value: last }),
      });
    })
      .then((value) => adapter.readResult?.(value) ?? value)
      .finally(() => (answer.handlerSettled = true));
  }

  /** Key, scope and fingerprint of a call; undefined when an optional key is absent. */
  private async describe(call: InterceptedCall, adapter: ContextAdapter): Promise<ProtectedCall | undefined> {
    const key = this.keyOf(call, adapter);
    if (key === undefined) {
      if (call.route.required === false) return undefined;
      throw new IdempotencyKeyMissingError(adapter.missingKey(call));
    }
    const operation = adapter.operation(call);
    const scope = this.scopeOf(call, adapter, operation);
    return this.service.call(recordKey(operation, scope, key), await adapter.fingerprint(call), call.route);
  }

  /** The caller's key, validated. A key function that throws is an invalid key (400), logged, never a raw error. */
  private keyOf(call: InterceptedCall, adapter: ContextAdapter): string | undefined {
    let key: unknown;
    try {
      key = adapter.key(call);
    } catch (error) {
      if (error instanceof IdempotencyError) throw error;
      this.logger.warn({
        msg: 'the key function threw; answering 400 key-invalid',
        operation: adapter.operation(call),
        error: String(error),
      });
      throw new IdempotencyKeyInvalidError('it could not be derived from the request');
    }
    return validateKey(key);
  }

  /** The caller's scope (the route's function, else the module's), warning when authenticated callers share keys. */
  private scopeOf(call: InterceptedCall, adapter: ContextAdapter, operation: string): string | undefined {
    const scope = call.route.scope ?? this.options.scope;
    const request = adapter.request(call) as { user?: unknown } | undefined;
    if (scope === undefined && request?.user !== undefined && request?.user !== null)
      this.warnUnscoped(call, operation);
    if (!scope) return undefined;
    try {
      return scope(call.context, request);
    } catch (error) {
      this.logger.error({
        msg: 'the scope function threw; answering 500 scope-failed, the handler does not run',
        operation,
        error: String(error),
      });
      throw new IdempotencyScopeFailedError(operation);
    }
  }

  private warnUnscoped({ context }: InterceptedCall, operation: string): void {
    if (this.unscopedWarned.has(context.getHandler())) return;
    this.unscopedWarned.add(context.getHandler());
    this.logger.warn(
      `${operation}: requests carry an authenticated user (req.user) but no scope is configured, so every caller shares one ` +
        "key space and a user who sends another user's key gets that user's response. Set scope, e.g. " +
        '(context, request) => request?.user?.id, or scope: false when keys are unique by construction.',
    );
  }
}
