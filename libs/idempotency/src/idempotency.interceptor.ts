import { setTimeout as sleep } from 'node:timers/promises';
import {
  CallHandler,
  ExecutionContext,
  Inject,
  Injectable,
  Logger,
  NestInterceptor,
  StreamableFile,
} from '@nestjs/common';
import { HttpAdapterHost, Reflector } from '@nestjs/core';
import { defer, lastValueFrom, Observable } from 'rxjs';
import { fingerprintRequest, RequestNotFingerprintableError, sha256 } from './fingerprint';
import { IdempotencyClock } from './idempotency.clock';
import { REPLAYED_HEADER, STORE_RETRY_AFTER_SECONDS } from './idempotency.constants';
import {
  IdempotencyProblemException,
  IdempotencyStoreThrottledError,
  IdempotencyStoreUnavailableError,
} from './idempotency.errors';
import { parseKeyHeader, validateKey } from './idempotency-key';
import { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition';
import {
  IdempotencyModuleOptions,
  IdempotentOptions,
  positiveSeconds,
  ResolvedIdempotencyOptions,
  resolveOptions,
} from './idempotency.options';
import { IdempotencyRecord, isClaimable, StoredResponse } from './idempotency.record';
import { IdempotentRoute } from './idempotent-route.metadata';
import { IdempotencyRepository } from './repository/idempotency.repository';
import { routeTemplate } from './route-identity';

/** One protected request, as the flow below needs it. */
interface IdempotentCall {
  /** The partition key: method, route template and a hash of scope + client key. Never the raw key. */
  recordKey: string;
  fingerprint: string;
  route: IdempotentOptions;
  response: unknown;
}

/** The result of trying to own a key: run the handler, or replay what the owner stored. */
type Acquired = { claimToken: string } | { replay: StoredResponse };

const MAX_POLL_INTERVAL_MS = 500;

/**
 * The request flow of an `@Idempotent()` route, in the order of the state machine:
 * claim the key → run the handler → complete (or fail), or, for a duplicate, replay / 409 / 422.
 * Store faults fail closed (503); the handler never runs without a claim.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  private readonly options: ResolvedIdempotencyOptions;

  constructor(
    private readonly reflector: Reflector,
    private readonly repository: IdempotencyRepository,
    private readonly clock: IdempotencyClock,
    private readonly adapterHost: HttpAdapterHost,
    @Inject(IDEMPOTENCY_MODULE_OPTIONS) options: IdempotencyModuleOptions,
  ) {
    this.options = resolveOptions(options);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const route = this.reflector.get(IdempotentRoute, context.getHandler());
    if (!route || context.getType() !== 'http') return next.handle();
    return defer(() => this.handle(context, next, route));
  }

  private async handle(context: ExecutionContext, next: CallHandler, route: IdempotentOptions): Promise<unknown> {
    const call = this.describe(context, route);
    if (!call) return lastValueFrom(next.handle(), { defaultValue: undefined });

    const acquired = await this.acquire(call);
    if ('replay' in acquired) return this.replay(call, acquired.replay);
    return this.execute(call, acquired.claimToken, next);
  }

  /** Key, scope, route and fingerprint of the request; undefined when an optional key is absent. */
  private describe(context: ExecutionContext, route: IdempotentOptions): IdempotentCall | undefined {
    const http = context.switchToHttp();
    const request = http.getRequest();
    const parsed = this.readKey(request, context, route);
    if (parsed.outcome === 'invalid') throw IdempotencyProblemException.keyInvalid(`Invalid idempotency key: ${parsed.reason}.`);
    if (parsed.outcome === 'missing') {
      if (route.required === false) return undefined;
      throw IdempotencyProblemException.keyMissing(this.options.keyHeader);
    }
    const method = String(this.adapterHost.httpAdapter.getRequestMethod(request)).toUpperCase();
    const template = routeTemplate(context);
    const scope = this.options.scope?.(context);
    try {
      return {
        recordKey: `${method} ${template}#${sha256(JSON.stringify([scope ?? null, parsed.key]))}`,
        fingerprint: fingerprintRequest({
          method,
          route: template,
          params: request.params,
          query: request.query,
          body: request.body,
        }),
        route,
        response: http.getResponse(),
      };
    } catch (error) {
      if (error instanceof RequestNotFingerprintableError) throw IdempotencyProblemException.requestInvalid(error.message);
      throw error;
    }
  }

  private readKey(request: any, context: ExecutionContext, route: IdempotentOptions) {
    if (!route.key) return parseKeyHeader(request.headers?.[this.options.keyHeader.toLowerCase()]);
    try {
      return validateKey(route.key(request, context));
    } catch {
      return { outcome: 'invalid' as const, reason: 'it could not be derived from the request' };
    }
  }

  /**
   * Claims the key. A lost claim is a duplicate: a different request → 422 (checked first), a completed one →
   * replay, one still running → 409 or, with `waitMs`, poll until it completes. If the owner failed or its
   * lease ran out meanwhile, claim again.
   */
  private async acquire(call: IdempotentCall): Promise<Acquired> {
    const waitUntil = performance.now() + (call.route.waitMs ?? 0);
    const leaseSeconds = this.routeSeconds(call.route, 'pendingTtlSeconds');
    let pollMs = 25;
    for (let attempt = 1; ; attempt++) {
      const claim = await this.store(() =>
        this.repository.claim({ key: call.recordKey, fingerprint: call.fingerprint, leaseSeconds }),
      );
      if (claim.claimed) return { claimToken: claim.claimToken };

      let existing: IdempotencyRecord | undefined = claim.existing;
      while (existing && !isClaimable(existing, this.clock.nowSeconds())) {
        if (existing.fingerprint !== call.fingerprint) throw IdempotencyProblemException.fingerprintMismatch();
        if (existing.status === 'COMPLETED') return { replay: this.completedResponse(existing) };
        if (performance.now() >= waitUntil) {
          throw IdempotencyProblemException.inFlight(Math.max(1, existing.expiresAt - this.clock.nowSeconds()));
        }
        await sleep(Math.min(pollMs, Math.max(1, waitUntil - performance.now())));
        pollMs = Math.min(pollMs * 2, MAX_POLL_INTERVAL_MS);
        existing = await this.store(() => this.repository.get({ key: call.recordKey }));
      }
      // The owner failed, its lease ran out or its record vanished: claimable again, within the wait budget.
      if (attempt > 1 && performance.now() >= waitUntil) throw IdempotencyProblemException.inFlight(1);
    }
  }

  private completedResponse(record: IdempotencyRecord): StoredResponse {
    const response = record.response;
    if (!response || response.bodyOmitted) throw IdempotencyProblemException.responseNotStored(response?.statusCode ?? 0);
    return response;
  }

  /** Runs the handler as the key's owner, then records the outcome before the response is sent. */
  private async execute(call: IdempotentCall, claimToken: string, next: CallHandler): Promise<unknown> {
    let body: unknown;
    try {
      body = await lastValueFrom(next.handle(), { defaultValue: undefined });
    } catch (error) {
      await this.release(call, claimToken);
      throw error;
    }
    const stored = this.capture(call.response, body);
    if (!stored) {
      this.logger.warn({ msg: 'response cannot be stored for replay (a stream, or not JSON); claim released', key: call.recordKey });
      await this.release(call, claimToken);
      return body;
    }
    try {
      const result = await this.repository.complete({
        key: call.recordKey,
        claimToken,
        response: stored,
        ttlSeconds: this.routeSeconds(call.route, 'ttlSeconds'),
      });
      if (!result.ok) this.logger.warn({ msg: 'completion refused', key: call.recordKey, reason: result.reason });
    } catch (error) {
      // The handler's effects happened; the caller gets them. The key unlocks when the lease ends.
      this.logger.error({ msg: 'completion not stored', key: call.recordKey, error: String(error) });
    }
    return body;
  }

  /** Marks the attempt FAILED so the key is claimable again at once. Never masks the original outcome. */
  private async release(call: IdempotentCall, claimToken: string): Promise<void> {
    try {
      const result = await this.repository.fail({ key: call.recordKey, claimToken, ttlSeconds: this.options.failedTtlSeconds });
      if (!result.ok) this.logger.warn({ msg: 'release refused', key: call.recordKey, reason: result.reason });
    } catch (error) {
      this.logger.error({ msg: 'release not stored; the key unlocks when its lease ends', key: call.recordKey, error: String(error) });
    }
  }

  /** The response as the client received it: status, allow-listed headers and the body as JSON would send it. */
  private capture(response: unknown, body: unknown): StoredResponse | undefined {
    if (body instanceof StreamableFile || typeof (body as { pipe?: unknown } | null)?.pipe === 'function') return undefined;
    const adapter = this.adapterHost.httpAdapter;
    const headers: Record<string, string> = {};
    for (const name of this.options.replayHeaders) {
      const value = adapter.getHeader(response, name);
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
    }
    const statusCode = (response as { statusCode: number }).statusCode;
    if (Buffer.isBuffer(body)) return { statusCode, headers, bodyBase64: body.toString('base64') };
    if (body === undefined) return { statusCode, headers };
    try {
      return { statusCode, headers, body: JSON.parse(JSON.stringify(body) ?? 'null') };
    } catch {
      return undefined;
    }
  }

  private replay(call: IdempotentCall, stored: StoredResponse): unknown {
    const adapter = this.adapterHost.httpAdapter;
    adapter.status(call.response, stored.statusCode);
    for (const [name, value] of Object.entries(stored.headers)) adapter.setHeader(call.response, name, value);
    adapter.setHeader(call.response, REPLAYED_HEADER, 'true');
    return stored.bodyBase64 === undefined ? stored.body : Buffer.from(stored.bodyBase64, 'base64');
  }

  private routeSeconds(route: IdempotentOptions, name: 'ttlSeconds' | 'pendingTtlSeconds'): number {
    const override = route[name];
    return override === undefined ? this.options[name] : positiveSeconds(name, override);
  }

  /** Store faults before the handler ran: 503, the handler does not run. */
  private async store<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (error instanceof IdempotencyStoreThrottledError) {
        throw IdempotencyProblemException.storeThrottled(STORE_RETRY_AFTER_SECONDS, error);
      }
      if (error instanceof IdempotencyStoreUnavailableError) {
        throw IdempotencyProblemException.storeUnavailable(STORE_RETRY_AFTER_SECONDS, error);
      }
      throw error;
    }
  }
}
