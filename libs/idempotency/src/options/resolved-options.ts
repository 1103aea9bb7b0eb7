import {
  DEFAULT_FAILED_TTL_SECONDS,
  DEFAULT_MAX_CRASHED_OWNERS,
  DEFAULT_KEY_HEADER,
  DEFAULT_MAX_LEASE_SECONDS,
  DEFAULT_PENDING_TTL_SECONDS,
  DEFAULT_REPLAY_CACHE_ENTRIES,
  DEFAULT_REPLAY_CACHE_MAX_AGE_SECONDS,
  LAMBDA_REPLAY_CACHE_ENTRIES,
  DEFAULT_REPLAY_HEADERS,
  DEFAULT_RETRY_AFTER_SECONDS,
  DEFAULT_TABLE_NAME,
  DEFAULT_TTL_SECONDS,
} from '../idempotency.constants';
import { onLambda } from '../lambda/lambda-environment';
import { TableLayout } from '../dynamodb/table-layout';
import { ResponseSealer } from '../response/response-sealing';
import { defaultStoreIf, IdempotencyModuleOptions, StoreIf, UnkeyedCalls } from './idempotency.options';
import {
  explicitClockSkew,
  partitionKeyValueOption,
  positiveInteger,
  crashedOwners,
  positiveSeconds,
  replayableHeaders,
  SecondsOption,
  validateCallSettings,
} from './option-checks';

/** The module options with every default filled in, validated once: the provider the module's classes inject. */
export const RESOLVED_IDEMPOTENCY_OPTIONS = Symbol('RESOLVED_IDEMPOTENCY_OPTIONS');

/** The module options with every default filled in. */
export type ResolvedIdempotencyOptions = Required<
  Pick<
    IdempotencyModuleOptions,
    | 'tableName'
    | 'ttlSeconds'
    | 'pendingTtlSeconds'
    | 'maxLeaseSeconds'
    | 'retryAfterSeconds'
    | 'failedTtlSeconds'
    | 'maxCrashedOwners'
    | 'keyHeader'
  >
> &
  Pick<
    IdempotencyModuleOptions,
    'scope' | 'reconcileIntervalSeconds' | 'clockSkewSeconds' | 'partitionKeyValue' | 'onOutcome'
  > & {
    /** Where the records sit in the table (its keys, attribute names, key prefix), checked. */
    layout: TableLayout;
    replayHeaders: string[];
    replayCacheEntries: number;
    replayCacheMaxAgeSeconds: number;
    failOnStartup: boolean;
    startupCheck: boolean;
    storeIf: StoreIf;
    unkeyedCalls: UnkeyedCalls;
    /** Lower-case names of outgoing headers that carry a key (`downstreamKeyHeaders`). */
    downstreamKeyHeaders: string[];
    /** Set when `encryption` is. */
    sealer?: ResponseSealer;
    /**
     * Not an option: how long a local owner's duplicates gather before their shared confirmation read
     * (`CONFIRMATION_GATHER_MS`). The simulation drives it at 0 (the read sent on the next turn), to stay in step.
     */
    confirmationGatherMs?: number;
  };

/** Every default filled in and every value checked: misconfiguration fails at startup, not on the first request. */
export function resolveOptions(options: IdempotencyModuleOptions): ResolvedIdempotencyOptions {
  const where = 'IdempotencyModule';
  const seconds = (name: SecondsOption | 'failedTtlSeconds', fallback: number) =>
    positiveSeconds(name, options[name] ?? fallback, where);
  const cache = options.replayCache;
  const clockSkewSeconds = explicitClockSkew(options.clockSkewSeconds, where);
  validateCallSettings(
    { storeIf: options.storeIf, pendingTtlSeconds: options.pendingTtlSeconds ?? DEFAULT_PENDING_TTL_SECONDS },
    where,
    clockSkewSeconds,
  );
  return {
    clockSkewSeconds,
    tableName: options.tableName ?? DEFAULT_TABLE_NAME,
    ttlSeconds: seconds('ttlSeconds', DEFAULT_TTL_SECONDS),
    pendingTtlSeconds: seconds('pendingTtlSeconds', DEFAULT_PENDING_TTL_SECONDS),
    maxLeaseSeconds: seconds('maxLeaseSeconds', DEFAULT_MAX_LEASE_SECONDS),
    retryAfterSeconds: seconds('retryAfterSeconds', DEFAULT_RETRY_AFTER_SECONDS),
    failedTtlSeconds: seconds('failedTtlSeconds', DEFAULT_FAILED_TTL_SECONDS),
    maxCrashedOwners: crashedOwners(options.maxCrashedOwners ?? DEFAULT_MAX_CRASHED_OWNERS, where),
    keyHeader: options.keyHeader ?? DEFAULT_KEY_HEADER,
    scope: options.scope,
    layout: TableLayout.from(options, where),
    partitionKeyValue: partitionKeyValueOption(options.partitionKeyValue, where),
    failOnStartup: options.failOnStartup ?? true,
    startupCheck: options.startupCheck ?? true,
    storeIf: options.storeIf ?? defaultStoreIf,
    onOutcome: onOutcomeOption(options.onOutcome, where),
    unkeyedCalls: unkeyedCallsOption(options.unkeyedCalls, where),
    downstreamKeyHeaders: headerNames('downstreamKeyHeaders', options.downstreamKeyHeaders ?? [], where),
    sealer: ResponseSealer.from(options.encryption, where),
    reconcileIntervalSeconds:
      options.reconcileIntervalSeconds === undefined
        ? undefined
        : positiveSeconds('reconcileIntervalSeconds', options.reconcileIntervalSeconds, where),
    replayHeaders: replayableHeaders(options.replayHeaders ?? DEFAULT_REPLAY_HEADERS, where),
    replayCacheEntries:
      cache?.enabled === false
        ? 0
        : positiveInteger(
            'replayCache.maxEntries',
            cache?.maxEntries ?? (onLambda() ? LAMBDA_REPLAY_CACHE_ENTRIES : DEFAULT_REPLAY_CACHE_ENTRIES),
            where,
            'entries',
          ),
    replayCacheMaxAgeSeconds: positiveSeconds(
      'replayCache.maxAgeSeconds',
      cache?.maxAgeSeconds ?? DEFAULT_REPLAY_CACHE_MAX_AGE_SECONDS,
      where,
    ),
  };
}

function onOutcomeOption(hook: unknown, where: string): IdempotencyModuleOptions['onOutcome'] {
  if (hook === undefined || typeof hook === 'function') return hook as IdempotencyModuleOptions['onOutcome'];
  throw new TypeError(`${where}: onOutcome must be a function (event) => void, got ${typeof hook}`);
}

function headerNames(name: string, value: unknown, where: string): string[] {
  const valid = (header: unknown) => typeof header === 'string' && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(header);
  if (Array.isArray(value) && value.every(valid)) return value.map((header: string) => header.toLowerCase());
  throw new TypeError(`${where}: ${name} must be a list of HTTP header names, got ${JSON.stringify(value)}`);
}

function unkeyedCallsOption(value: unknown, where: string): UnkeyedCalls {
  if (value === undefined) return 'warn';
  if (value === 'warn' || value === 'error' || value === 'off') return value;
  throw new TypeError(`${where}: unkeyedCalls must be 'warn', 'error' or 'off', got ${JSON.stringify(value)}`);
}
