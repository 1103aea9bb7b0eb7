import { DynamoDBClient, DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ExecutionContext } from '@nestjs/common';
import {
  DEFAULT_FAILED_TTL_SECONDS,
  DEFAULT_KEY_HEADER,
  DEFAULT_MAX_LEASE_SECONDS,
  DEFAULT_PENDING_TTL_SECONDS,
  DEFAULT_REPLAY_CACHE_ENTRIES,
  DEFAULT_REPLAY_HEADERS,
  DEFAULT_RETRY_AFTER_SECONDS,
  DEFAULT_TABLE_NAME,
  DEFAULT_TTL_SECONDS,
} from '../idempotency.constants';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { EncryptionOptions, ResponseSealer } from '../response/response-sealing';

/**
 * Whether an outcome is final: stored and replayed to every retry (true), or released so that a retry runs the handler
 * again (false). Asked with the response's status for every result, and with the exception's for every
 * `HttpException` (`RpcException` on message handlers) the handler throws; other errors are never final.
 */
export type StoreIf = (status: number, error?: unknown) => boolean;

/** Statuses a client is expected to fix and retry with the same key: never final by default. */
const RETRYABLE_CLIENT_STATUSES = new Set([400, 401, 407, 408, 409, 422, 429]);

/**
 * The default `storeIf`, as Stripe and the IETF draft behave: every 2xx and 3xx is final, and every 4xx except 400,
 * 401, 407, 408, 409, 422 and 429 (a malformed or rejected request, credentials to refresh, a timeout, a conflict, a
 * rate limit: the caller's to fix and retry); no 5xx is.
 */
export const defaultStoreIf: StoreIf = (status) => status < 400 || (status < 500 && !RETRYABLE_CLIENT_STATUSES.has(status));

/** Options of `IdempotencyModule.forRoot()` / `forRootAsync()`. */
export interface IdempotencyModuleOptions {
  /** DynamoDB table holding the records. Default `idempotency_keys`. */
  tableName?: string;
  /** A client the app already has (plain or document client). Takes precedence over `clientConfig`. */
  client?: DynamoDBClient | DynamoDBDocumentClient;
  /** Configuration for a client the module creates, when `client` is not given. */
  clientConfig?: DynamoDBClientConfig;
  /** Seconds a completed response is replayed. Default 86400. */
  ttlSeconds?: number;
  /**
   * Seconds a claim (lease) holds before another caller may take over a crashed owner. A live owner renews it every
   * third of this while it works, so a slow handler is not run twice for being slow. Default 60.
   */
  pendingTtlSeconds?: number;
  /** Seconds after which a handler that still runs is no longer renewed, so a hung one cannot block its key forever. Default 3600. */
  maxLeaseSeconds?: number;
  /** `Retry-After` on a 409 while another request runs (never more than until its lease could be taken over). Default 1. */
  retryAfterSeconds?: number;
  /** Seconds a failed attempt is kept (it is claimable again at once). Default 300. */
  failedTtlSeconds?: number;
  /**
   * How far apart two processes' clocks may be, in seconds. A lease is taken over only once its end is this far in the
   * past, so a process whose clock runs ahead never takes over a live owner. Default 2, but never more than a quarter
   * of the lease (`pendingTtlSeconds`) unless set; an explicit value must stay below a third of every lease.
   */
  clockSkewSeconds?: number;
  /** Header carrying the client's key. Default `Idempotency-Key`. */
  keyHeader?: string;
  /**
   * The caller's principal or tenant. Keys are scoped by it, so user B reusing user A's key never sees
   * A's response. Return undefined for unauthenticated routes. Without it, a request carrying an authenticated user
   * (`req.user`) logs a warning once per route; `false` says keys are unique by construction (webhook event ids).
   */
  scope?: Scope;
  /**
   * Response headers stored and replayed (case-insensitive). Default `content-type`, `location`. Headers that belong to
   * one response (`set-cookie`, `authorization`, `www-authenticate`, `proxy-authenticate`) and hop-by-hop headers are
   * refused at startup. A header sent more than once (`link`, `vary`) is replayed as its separate values.
   */
  replayHeaders?: string[];
  /** Which outcomes are final (stored and replayed, errors included). Default `defaultStoreIf`. */
  storeIf?: StoreIf;
  /**
   * The table is checked once at startup (`DescribeTable`: credentials, existence, key schema). `true` (default): a
   * problem fails application startup with the reason and the fix. `false`: it is only logged, for apps that must
   * start while DynamoDB is down (requests then answer 503 until it is back).
   */
  failOnStartup?: boolean;
  /** Seal stored responses with AES-256-GCM (`node:crypto`). Off by default. */
  encryption?: EncryptionOptions;
  /** Replaces the DynamoDB repository, e.g. with `InMemoryIdempotencyRepository` in a unit test. */
  repository?: IdempotencyRepository;
  /** Run `IdempotencyReconciler.sweep()` every this many seconds in this process. Off by default. */
  reconcileIntervalSeconds?: number;
  /**
   * An in-process LRU of COMPLETED records, so hot replays cost no DynamoDB call. On by default, 1000 entries
   * (responses over 64 KB are not kept).
   */
  replayCache?: { enabled?: boolean; maxEntries?: number };
}

/**
 * How keys are scoped to callers: a function of the call, or `false` for keys unique by construction. `request` is the
 * HTTP request behind the call (an HTTP route, or a GraphQL operation over HTTP; undefined for message handlers), so
 * `(context, request) => request?.user?.id` works on every kind of route.
 */
export type Scope = ((context: ExecutionContext, request?: any) => string | undefined) | false;

/** Per-route options of `@Idempotent()`. */
export interface IdempotentOptions {
  /** Overrides the module's `scope` for this route (e.g. `false` on a webhook keyed by the event id). */
  scope?: Scope;
  /** Overrides the module's `ttlSeconds` for this route. */
  ttlSeconds?: number;
  /** Overrides the module's `pendingTtlSeconds` for this route. */
  pendingTtlSeconds?: number;
  /** Overrides the module's `maxLeaseSeconds` for this route. */
  maxLeaseSeconds?: number;
  /** Overrides the module's `retryAfterSeconds` for this route. */
  retryAfterSeconds?: number;
  /** A missing key is a 400 (default). With `false` a request without a key runs unprotected. */
  required?: boolean;
  /**
   * Derives the key from the request instead of the header (for example an order number in the body).
   * Returning undefined means "no key".
   */
  key?: (request: any, context: ExecutionContext) => string | number | undefined;
  /**
   * While another request with the key is running: 0 (default) answers 409 at once; otherwise wait up to
   * this many milliseconds for its result, polling with consistent reads.
   */
  waitMs?: number;
  /** Overrides the module's `storeIf` for this route. */
  storeIf?: StoreIf;
  /**
   * GraphQL mutations: take the key from an argument (`{ arg: 'input.requestId' }`, a dotted path into the field's
   * arguments) instead of the `Idempotency-Key` header.
   */
  keyFrom?: { arg: string };
}

/** The module options with every default filled in, validated once: the provider the module's classes inject. */
export const RESOLVED_IDEMPOTENCY_OPTIONS = Symbol('RESOLVED_IDEMPOTENCY_OPTIONS');

/** The module options with every default filled in. */
export type ResolvedIdempotencyOptions = Required<
  Pick<
    IdempotencyModuleOptions,
    'tableName' | 'ttlSeconds' | 'pendingTtlSeconds' | 'maxLeaseSeconds' | 'retryAfterSeconds' | 'failedTtlSeconds' | 'keyHeader'
  >
> &
  Pick<IdempotencyModuleOptions, 'scope' | 'reconcileIntervalSeconds' | 'clockSkewSeconds'> & {
    replayHeaders: string[];
    replayCacheEntries: number;
    failOnStartup: boolean;
    storeIf: StoreIf;
    /** Set when `encryption` is. */
    sealer?: ResponseSealer;
  };

/** Every default filled in and every value checked: misconfiguration fails at startup, not on the first request. */
export function resolveOptions(options: IdempotencyModuleOptions): ResolvedIdempotencyOptions {
  const where = 'IdempotencyModule';
  const seconds = (name: SecondsOption | 'failedTtlSeconds', fallback: number) =>
    positiveSeconds(name, options[name] ?? fallback, where);
  const cache = options.replayCache;
  const clockSkewSeconds = explicitClockSkew(options.clockSkewSeconds, where);
  validateCallSettings({ storeIf: options.storeIf, pendingTtlSeconds: options.pendingTtlSeconds ?? DEFAULT_PENDING_TTL_SECONDS }, where, clockSkewSeconds);
  return {
    clockSkewSeconds,
    tableName: options.tableName ?? DEFAULT_TABLE_NAME,
    ttlSeconds: seconds('ttlSeconds', DEFAULT_TTL_SECONDS),
    pendingTtlSeconds: seconds('pendingTtlSeconds', DEFAULT_PENDING_TTL_SECONDS),
    maxLeaseSeconds: seconds('maxLeaseSeconds', DEFAULT_MAX_LEASE_SECONDS),
    retryAfterSeconds: seconds('retryAfterSeconds', DEFAULT_RETRY_AFTER_SECONDS),
    failedTtlSeconds: seconds('failedTtlSeconds', DEFAULT_FAILED_TTL_SECONDS),
    keyHeader: options.keyHeader ?? DEFAULT_KEY_HEADER,
    scope: options.scope,
    failOnStartup: options.failOnStartup ?? true,
    storeIf: options.storeIf ?? defaultStoreIf,
    sealer: ResponseSealer.from(options.encryption, where),
    reconcileIntervalSeconds:
      options.reconcileIntervalSeconds === undefined
        ? undefined
        : positiveSeconds('reconcileIntervalSeconds', options.reconcileIntervalSeconds, where),
    replayHeaders: replayableHeaders(options.replayHeaders ?? DEFAULT_REPLAY_HEADERS, where),
    replayCacheEntries:
      cache?.enabled === false
        ? 0
        : positiveInteger('replayCache.maxEntries', cache?.maxEntries ?? DEFAULT_REPLAY_CACHE_ENTRIES, where, 'entries'),
  };
}

/**
 * Headers a replay must never carry: credentials and challenges that belong to one response (a session cookie handed
 * to whoever replays the key), and hop-by-hop headers that describe one connection.
 */
const UNREPLAYABLE_HEADERS = new Set([
  'set-cookie',
  'authorization',
  'proxy-authenticate',
  'www-authenticate',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'te',
  'trailer',
]);

function replayableHeaders(names: unknown, where: string): string[] {
  if (!Array.isArray(names) || names.some((name) => typeof name !== 'string')) {
    throw new Error(`${where}: idempotency option replayHeaders must be a list of header names, got ${JSON.stringify(names)}`);
  }
  const lower = names.map((name: string) => name.toLowerCase());
  const refused = lower.find((name) => UNREPLAYABLE_HEADERS.has(name));
  if (refused) {
    throw new Error(
      `${where}: replayHeaders may not include ${refused}: it belongs to one response or one connection, and a replay would ` +
        'hand it to whoever sends the key again. Remove it from replayHeaders.',
    );
  }
  return lower;
}

/** The options a route (or a call) may override that are whole seconds. */
export type SecondsOption = 'ttlSeconds' | 'pendingTtlSeconds' | 'maxLeaseSeconds' | 'retryAfterSeconds';
const SECONDS_OPTIONS: SecondsOption[] = ['ttlSeconds', 'pendingTtlSeconds', 'maxLeaseSeconds', 'retryAfterSeconds'];

/** The default skew: 2 s, but never more than a quarter of the lease, so that short leases keep working. */
const DEFAULT_CLOCK_SKEW_SECONDS = 2;

/** The skew a call with this lease runs with: the explicit `clockSkewSeconds`, else the default for its lease. */
export function clockSkewFor(leaseSeconds: number, explicit: number | undefined): number {
  return explicit ?? Math.min(DEFAULT_CLOCK_SKEW_SECONDS, leaseSeconds / 4);
}

function explicitClockSkew(value: unknown, where: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new Error(`${where}: idempotency option clockSkewSeconds must be a number of seconds ≥ 0, got ${String(value)}`);
  }
  return value;
}

/**
 * Checks a route's (or a call's) overrides; `where` names the route in the error. `clockSkewSeconds` is the module's
 * explicit skew, checked against the lease the overrides give.
 */
export function validateCallSettings(
  settings: Partial<Record<SecondsOption, unknown>> & { waitMs?: unknown; storeIf?: unknown; keyFrom?: unknown },
  where: string,
  clockSkewSeconds?: number,
): void {
  for (const name of SECONDS_OPTIONS) {
    if (settings[name] !== undefined) positiveSeconds(name, settings[name], where);
  }
  const lease = settings.pendingTtlSeconds as number | undefined;
  if (clockSkewSeconds !== undefined && lease !== undefined && clockSkewSeconds >= lease / 3) {
    throw new Error(
      `${where}: clockSkewSeconds (${clockSkewSeconds}) must be less than a third of pendingTtlSeconds (${lease}): a live ` +
        'owner renews its lease every third of it, so a larger skew would let another process take over a lease that is ' +
        'still being renewed. Lower clockSkewSeconds or raise pendingTtlSeconds.',
    );
  }
  const { waitMs, storeIf, keyFrom } = settings;
  const arg = (keyFrom as { arg?: unknown } | undefined)?.arg;
  if (keyFrom !== undefined && (typeof arg !== 'string' || arg === '')) {
    throw new Error(`${where}: idempotency option keyFrom must be { arg: 'path.to.argument' }, got ${JSON.stringify(keyFrom)}`);
  }
  if (storeIf !== undefined && typeof storeIf !== 'function') {
    throw new Error(`${where}: idempotency option storeIf must be a function (status, error?) => boolean, got ${String(storeIf)}`);
  }
  if (waitMs !== undefined && !(typeof waitMs === 'number' && Number.isFinite(waitMs) && waitMs >= 0)) {
    throw new Error(`${where}: idempotency option waitMs must be a number of milliseconds ≥ 0, got ${String(waitMs)}`);
  }
}

export function positiveSeconds(name: string, value: unknown, where: string): number {
  return positiveInteger(name, value, where, 'seconds');
}

function positiveInteger(name: string, value: unknown, where: string, unit: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw new Error(`${where}: idempotency option ${name} must be a positive whole number of ${unit}, got ${String(value)}`);
  }
  return value;
}
