import { CallHandler, ExecutionContext, Inject, Injectable, Logger, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Observable } from 'rxjs';
import { IdempotencyError } from '../errors/idempotency.errors';
import { IdempotentOptions, StoreIf } from '../options/idempotency.options';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { idempotentOptionsOf } from '../options/route-settings';
import { IdempotencyService } from '../protocol/idempotency.service';
import { AdaptedWork } from './adapted-work';
import { CallDescriber } from './call-describer';
import { Answer, ClientAnswer } from './client-answer';
import { ContextAdapter, InterceptedCall } from './context-adapter';
import { GraphqlContextAdapter } from './graphql.context';
import { runHandler } from './handler-run';
import { HttpContextAdapter } from './http.context';
import { isMcpToolCall, McpContextAdapter } from './mcp.context';
import { RpcContextAdapter } from './rpc.context';

/**
 * Marks the calls an `IdempotencyInterceptor` has seen (Nest hands every interceptor of one call the same context): a
 * property of the call's own context, which goes with it, rather than an entry in a weak set for the GC to clear.
 */
const INTERCEPTED = Symbol('idempotency.intercepted');

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
  private readonly adapters: Record<string, ContextAdapter>;

  constructor(
    private readonly reflector: Reflector,
    private readonly service: IdempotencyService,
    private readonly describer: CallDescriber,
    http: HttpContextAdapter,
    rpc: RpcContextAdapter,
    graphql: GraphqlContextAdapter,
    mcp: McpContextAdapter,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {
    this.adapters = { http, rpc, graphql, mcp };
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    // Bound on both the class and the method (or also globally), it runs more than once per call: only the first counts.
    const marked = context as ExecutionContext & { [INTERCEPTED]?: true };
    if (marked[INTERCEPTED]) return next.handle();
    marked[INTERCEPTED] = true;
    const route = this.routeOptions(context);
    const adapter = route && this.adapters[isMcpToolCall(context) ? 'mcp' : context.getType<string>()];
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
      const storeIf = call.route.storeIf ?? this.options.storeIf;
      const work = new InterceptedWork(call, adapter, next, answer, this.describer, storeIf);
      const settled = (outcome: Answer) => {
        answer.send(outcome);
        if (work.owned && (answer.early || adapter.clientGone?.(call))) {
          this.logger.warn({
            msg: 'the client was answered before the handler finished (a timeout, or it went away); the handler’s own outcome is stored and replayed',
            operation: adapter.operation(call),
          });
        }
      };
      this.service.run(work).then(
        (value) => settled({ value }),
        (error) => settled(error instanceof IdempotencyError ? problemAnswer(error, call, adapter) : { error }),
      );
      return () => answer.abandon();
    });
  }
}

/** A protocol error as the client gets it: an error, or a result where its clients read results (MCP tools). */
function problemAnswer(error: IdempotencyError, call: InterceptedCall, adapter: ContextAdapter): Answer {
  return adapter.problemResult
    ? { value: adapter.problemResult(error, call) }
    : { error: adapter.problem(error, call) };
}

/** One intercepted call: the handler runs through the interceptor's `next.handle()`, its client answered as it goes. */
class InterceptedWork extends AdaptedWork {
  /** Set once the handler runs (as the key's owner, or unprotected without a key). */
  owned = false;

  constructor(
    call: InterceptedCall,
    adapter: ContextAdapter,
    private readonly next: CallHandler,
    private readonly answer: ClientAnswer,
    describer: CallDescriber,
    storeIf: StoreIf,
  ) {
    super(call, adapter, describer, storeIf);
  }

  execute(): Promise<unknown> {
    this.owned = true;
    if (this.call.route.mode === 'optimistic') this.headersBefore = this.adapter.headerNames?.(this.call);
    return runHandler(this.call, this.adapter, this.next, this.answer);
  }

  protected override responseState() {
    return this.answer.state();
  }
}
