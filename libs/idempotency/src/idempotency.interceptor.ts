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
  ProblemType,
  ProblemTypeUri,
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
import { IdempotencyTelemetry, RequestOutcome } from './idempotency.telemetry';
import { IdempotencyRepository, TransitionResult } from './repository/idempotency.repository';
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

const OUTCOME_OF_PROBLEM: Record<ProblemTypeUri, RequestOutcome> = {
  [ProblemType.keyMissing]: 'missing_key',
  [ProblemType.keyInvalid]: 'invalid_key',
  [ProblemType.requestInvalid]: 'invalid_request',
  [ProblemType.fingerprintMismatch]: 'mismatch',
  [ProblemType.inFlight]: 'in_flight',
  [ProblemType.responseNotStored]: 'response_not_stored',
  [ProblemType.storeThrottled]: 'store_throttled',
  [ProblemType.storeUnavailable]: 'store_unavailable',
};

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
    private readonly telemetry: IdempotencyTelemetry,
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
    try {
      const call = this.describe(context, route);
      if (!call) return await lastValueFrom(next.handle(), { defaultValue: undefined });

      const acquired = await this.acquire(call);
      if ('replay' in acquired) {
        this.telemetry.request('replayed');
        return this.replay(call, acquired.replay);
      }
      return await this.execute(call, acquired.claimToken, next);
    } catch (error) {
      if (error instanceof IdempotencyProblemException) this.telemetry.request(OUTCOME_OF_PROBLEM[error.problem.type]);
      throw error;
    }
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
      const claim = await this.telemetry.span('dedup.claim', { 'idempotency.key': call.recordKey }, async (span) => {
        const result = await this.store(() =>
          this.repository.claim({ key: call.recordKey, fingerprint: call.fingerprint, leaseSeconds }),
        );
        span.setAttribute('dynamo.condition_result', result.claimed ? 'won' : 'lost');
        return result;
      });
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
      this.telemetry.request('executed');
      await this.release(call, claimToken);
      throw error;
    }
    const stored = this.capture(call.response, body);
    if (!stored) {
      this.telemetry.request('executed');
      this.logger.warn({ msg: 'response cannot be stored for replay (a stream, or not JSON); claim released', key: call.recordKey });
      await this.release(call, claimToken);
      return body;
    }
    const result = await this.complete(call, claimToken, stored);
    this.telemetry.request(result?.ok === false && result.reason === 'lease_lost' ? 'lease_lost' : 'executed');
    return body;
  }

  /**
   * PENDING → COMPLETED. A refusal is never the caller's problem (it still gets its own result), but it is
   * counted: the same claim completing twice is a benign race; another claim's COMPLETED record means the
   * handler ran for a key that was already done (the lease was too short for the handler).
   */
  private async complete(call: IdempotentCall, claimToken: string, response: StoredResponse): Promise<TransitionResult | undefined> {
    try {
      return await this.telemetry.span('dedup.complete', { 'idempotency.key': call.recordKey }, async (span) => {
        const result = await this.repository.complete({
          key: call.recordKey,
          claimToken,
          response,
          ttlSeconds: this.routeSeconds(call.route, 'ttlSeconds'),
        });
        span.setAttribute('dynamo.condition_result', result.ok ? 'won' : result.reason);
        if (result.ok) return result;
        if (result.reason === 'already_completed') this.telemetry.completionRaced();
        if (result.reason === 'lease_lost' && result.current?.status === 'COMPLETED') this.telemetry.reexecutionDetected();
        this.logger.warn({
          msg: 'completion refused',
          key: call.recordKey,
          reason: result.reason,
          current_status: result.current?.status,
          pending_since: result.current?.pendingSince,
        });
        return result;
      });
    } catch (error) {
      // The handler's effects happened; the caller gets them. The key unlocks when the lease ends.
      this.logger.error({ msg: 'completion not stored', key: call.recordKey, error: String(error) });
      return undefined;
    }
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
