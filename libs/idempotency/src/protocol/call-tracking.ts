import { Injectable, OnModuleInit } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { IdempotencyContext, injectsIdempotencyContext, untrackContext } from './idempotency-context';

/**
 * Whether protected calls are tracked through AsyncLocalStorage, so that an injected `IdempotencyContext` finds the
 * running claim anywhere in the work. Only when something in the application has `IdempotencyContext` injected: on
 * Node 20 and 22 AsyncLocalStorage adds work to every promise of the process. `execute()` hands its function a context
 * bound to the call either way.
 */
@Injectable()
export class CallTracking implements OnModuleInit {
  /** True until startup has looked: a call made before then is tracked, to be safe. */
  tracked = true;

  constructor(
    private readonly modules: ModulesContainer,
    private readonly context: IdempotencyContext,
  ) {}

  onModuleInit(): void {
    const wrappers = [...this.modules.values()].flatMap((module) => [
      ...module.providers.values(),
      ...module.controllers.values(),
      ...module.injectables.values(),
      ...module.middlewares.values(),
    ]);
    // This class holds the context only to untrack it: it does not count.
    this.tracked = wrappers.some((wrapper) => wrapper.metatype !== CallTracking && injectsIdempotencyContext(wrapper));
    if (!this.tracked) untrackContext(this.context);
  }
}
