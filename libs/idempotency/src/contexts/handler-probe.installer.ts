import { Injectable } from '@nestjs/common';
import { MetadataScanner, ModulesContainer, Reflector } from '@nestjs/core';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { idempotentOptionsOf } from '../options/route-settings';
import { HandlerProbe } from './handler-probe';
import { INTERCEPTORS_METADATA } from '../nest-internals';

const probe = new HandlerProbe();

/**
 * Puts a `HandlerProbe` innermost on every protected handler that has interceptors inside `@Idempotent()`, so that
 * the stored outcome is the handler's own even when one of them answers first (a timeout bound after the decorator).
 * Handlers without inner interceptors need none: what the interceptor's `next.handle()` gives is the handler itself.
 *
 * It runs when the provider is constructed: Nest reads a route's interceptors when it registers the route, which
 * happens in `app.init()` before any `onModuleInit` hook, but after every provider is constructed.
 */
@Injectable()
export class HandlerProbeInstaller {
  constructor(modules: ModulesContainer) {
    const reflector = new Reflector();
    const scanner = new MetadataScanner();
    for (const module of modules.values()) {
      for (const wrapper of [...module.controllers.values(), ...module.providers.values()]) {
        const type = wrapper.metatype;
        if (typeof type !== 'function' || wrapper.inject || !type.prototype) continue;
        for (const name of scanner.getAllMethodNames(type.prototype)) {
          const handler = type.prototype[name];
          if (idempotentOptionsOf(reflector, handler, type) && interceptorsInside(type, handler).length > 0)
            installProbe(handler);
        }
      }
    }
  }
}

const isIdempotencyInterceptor = (entry: unknown) =>
  entry === IdempotencyInterceptor || entry instanceof IdempotencyInterceptor;

/**
 * The interceptors that run between `IdempotencyInterceptor` and the handler, as bound (classes or instances): those
 * after it on the class or the method (the class's run first), or all of them when it is not bound there (registered
 * globally, so outside every one).
 */
export function interceptorsInside(type: Function, handler: Function): unknown[] {
  const chain: unknown[] = [
    ...(Reflect.getMetadata(INTERCEPTORS_METADATA, type) ?? []),
    ...(Reflect.getMetadata(INTERCEPTORS_METADATA, handler) ?? []),
  ];
  const ours = chain.findIndex(isIdempotencyInterceptor);
  return chain.slice(ours + 1).filter((entry) => !isIdempotencyInterceptor(entry) && !(entry instanceof HandlerProbe));
}

/** Appends the probe once (a class may serve several applications in one process, as in tests). */
function installProbe(handler: Function): void {
  const interceptors: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, handler) ?? [];
  if (interceptors.at(-1) instanceof HandlerProbe) return;
  Reflect.defineMetadata(INTERCEPTORS_METADATA, [...interceptors, probe], handler);
}
