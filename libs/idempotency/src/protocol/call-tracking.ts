import { Inject, Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { hasProtectedMethods } from '../decorators/idempotent-method';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { observeOutgoingRequests } from '../unkeyed-calls/outgoing-requests';
import { UnkeyedCallWatch } from '../unkeyed-calls/unkeyed-call-watch';
import { IdempotencyContext, injectsIdempotencyContext, untrackContext } from './idempotency-context';

/**
 * Whether protected calls are tracked through AsyncLocalStorage, so that an injected `IdempotencyContext` and the
 * watch over unkeyed side effects (`unkeyedCalls`) find the running claim anywhere in the work, and a provider method
 * that calls itself with its key is refused (`IdempotencyReentrantCallError`). Only when one of them needs it: on Node
 * 20 and 22 AsyncLocalStorage adds work to every promise of the process. `execute()` hands its function a context
 * bound to the call either way.
 */
@Injectable()
export class CallTracking implements OnModuleInit, OnApplicationShutdown {
  /** True until startup has looked: a call made before then is tracked, to be safe. */
  tracked = true;
  /** The watch over side effects sent without a key, unless `unkeyedCalls` is off. */
  readonly watch?: UnkeyedCallWatch;
  private stopObserving?: () => void;

  constructor(
    private readonly modules: ModulesContainer,
    private readonly context: IdempotencyContext,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
    telemetry: IdempotencyTelemetry,
  ) {
    if (options.unkeyedCalls !== 'off') {
      const keyHeaders = [options.keyHeader, ...options.downstreamKeyHeaders];
      this.watch = new UnkeyedCallWatch(options.unkeyedCalls, keyHeaders, telemetry);
    }
  }

  onModuleInit(): void {
    const wrappers = [...this.modules.values()].flatMap((module) => [
      ...module.providers.values(),
      ...module.controllers.values(),
      ...module.injectables.values(),
      ...module.middlewares.values(),
    ]);
    // This class holds the context only to untrack it: it does not count.
    const injected = wrappers.some(
      (wrapper) => wrapper.metatype !== CallTracking && injectsIdempotencyContext(wrapper),
    );
    this.tracked =
      injected || this.watch !== undefined || wrappers.some(({ instance }) => hasProtectedMethods(instance));
    if (!this.tracked) untrackContext(this.context);
    if (this.watch) this.stopObserving ??= observeOutgoingRequests();
  }

  onApplicationShutdown(): void {
    this.stopObserving?.();
    this.stopObserving = undefined;
  }
}
