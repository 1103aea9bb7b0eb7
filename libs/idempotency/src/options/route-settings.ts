import { Reflector } from '@nestjs/core';
import { CLASS_PROTECTED_METHODS, IdempotentRoute, isGraphqlMutation } from '../decorators/idempotent-route.metadata';
import { METHOD_METADATA } from '../nest-internals';
import { IdempotencyMode, IdempotentOptions } from './idempotency.options';
import { clockSkewFor } from './option-checks';
import { ResolvedIdempotencyOptions } from './resolved-options';
import type { VersionChange } from '../repository/store-inputs';

/** Per-call settings; undefined fields fall back to the module's options. */
export interface CallSettings {
  ttlSeconds?: number;
  pendingTtlSeconds?: number;
  maxLeaseSeconds?: number;
  /** Crashed owners of a key before the next claim stores it as poisoned (`maxCrashedOwners`; 0: never). */
  maxCrashedOwners?: number;
  /** `IdempotencyInFlightError.retryAfterSeconds` (the 409's `Retry-After`). */
  retryAfterSeconds?: number;
  /** 0 (default): throw `IdempotencyInFlightError` at once while another call runs; otherwise wait up to this long. */
  waitMs?: number;
  /**
   * `'lease'` (default): the key is claimed before the work runs, so it runs once. `'optimistic'`: no claim; the
   * work runs, then one write stores its outcome (with its `commitWith` writes) if no other call stored one first;
   * concurrent duplicates may each run the work, and all but the first to store get the first's outcome. Safe only
   * for work whose effects are `commitWith` writes and calls keyed by `deriveKey` (docs/optimistic-mode.md).
   */
  mode?: IdempotencyMode;
  /** The version of the work's steps, written on the record (`IdempotentOptions.version`). */
  version?: string;
  /** With `version`: what a run does with steps of another version (`IdempotentOptions.onVersionChange`). */
  onVersionChange?: VersionChange;
}

/** The settings one call runs with, every field filled in. */
export interface CallPolicy {
  /** The lease: `pendingTtlSeconds`. */
  leaseSeconds: number;
  maxLeaseSeconds: number;
  maxCrashedOwners: number;
  retryAfterSeconds: number;
  ttlSeconds: number;
  waitMs: number;
  /** How far another process's clock may run ahead (see `clockSkewSeconds`). */
  clockSkewSeconds: number;
  mode: IdempotencyMode;
  version?: string;
  onVersionChange?: VersionChange;
}

/**
 * The one place settings are merged: a handler's own `@Idempotent()` options over its class's (here), those over the
 * module's (`callPolicy`), field by field.
 */
export function callPolicy(settings: CallSettings, options: ResolvedIdempotencyOptions): CallPolicy {
  const leaseSeconds = settings.pendingTtlSeconds ?? options.pendingTtlSeconds;
  return {
    leaseSeconds,
    maxLeaseSeconds: settings.maxLeaseSeconds ?? options.maxLeaseSeconds,
    maxCrashedOwners: settings.maxCrashedOwners ?? options.maxCrashedOwners,
    retryAfterSeconds: settings.retryAfterSeconds ?? options.retryAfterSeconds,
    ttlSeconds: settings.ttlSeconds ?? options.ttlSeconds,
    waitMs: settings.waitMs ?? 0,
    clockSkewSeconds: clockSkewFor(leaseSeconds, options.clockSkewSeconds),
    mode: settings.mode ?? 'lease',
    version: settings.version,
    onVersionChange: settings.version === undefined ? undefined : (settings.onVersionChange ?? 'refuse'),
  };
}

/** Whether a class-level `@Idempotent()` covers this handler: a POST, PUT, PATCH or DELETE route, or a GraphQL mutation. */
function changesSomething(handler: Function): boolean {
  return CLASS_PROTECTED_METHODS.has(Reflect.getMetadata(METHOD_METADATA, handler)) || isGraphqlMutation(handler);
}

/**
 * The options a handler runs under, or undefined when it is not protected: its own `@Idempotent()` options merged field
 * by field over its class's. A class-level `@Idempotent()` protects a controller's POST, PUT, PATCH and DELETE routes
 * and a resolver's mutations; a handler's own decorator protects it whatever it is.
 */
export function idempotentOptionsOf(
  reflector: Reflector,
  handler: Function,
  type: Function,
): IdempotentOptions | undefined {
  const own = reflector.get(IdempotentRoute, handler);
  const inherited = reflector.get(IdempotentRoute, type);
  if (!inherited) return own;
  if (!own && !changesSomething(handler)) return undefined;
  const merged: IdempotentOptions = { ...inherited };
  for (const [name, value] of Object.entries(own ?? {}))
    if (value !== undefined) (merged as Record<string, unknown>)[name] = value;
  return merged;
}
