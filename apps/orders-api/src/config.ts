import { onLambda, TableLayoutOptions } from 'nestjs-dynamodb-idempotency';

/** The demo's settings, all from the environment (see docs/demo.md). */
export interface OrdersApiConfig {
  /** The HTTP platform (PLATFORM, default `express`). */
  platform: 'express' | 'fastify';
  port: number;
  /** The TCP microservice transport of the payments consumer. */
  microservicePort: number;
  /** Unset: an embedded dynalite is started in-process. */
  dynamoEndpoint?: string;
  region: string;
  idempotencyTable: string;
  /**
   * The idempotency table's keys (IDEMPOTENCY_PARTITION_KEY, IDEMPOTENCY_SORT_KEY, IDEMPOTENCY_KEY_PREFIX); unset: the
   * module's own layout (`pk` alone).
   */
  idempotencyLayout: TableLayoutOptions;
  /** ORDERS_TABLE; with a layout of its own, the idempotency table by default: one table for both (single-table). */
  ordersTable: string;
  idempotencyTtlSeconds?: number;
  idempotencyPendingTtlSeconds?: number;
  /** A simulated slow payment step inside POST /orders. */
  orderProcessingDelayMs: number;
  /** The payment provider `POST /checkouts` charges (PAYMENTS_URL); unset: this app's own `/payments/charges`. */
  paymentsUrl?: string;
  /** A simulated slow step inside POST /checkouts, after the charge (CHECKOUT_DELAY_MS). */
  checkoutDelayMs: number;
  /**
   * A pause inside POST /purchases (PURCHASE_PAUSE, `after-charge:5000` or `in-receipt:5000`): the window a crash or a
   * freeze falls in, between its two steps or inside the second after its call.
   */
  purchasePause?: { at: 'after-charge' | 'in-receipt'; ms: number };
  /**
   * POST /purchases fails with a 503 after its charge step (PURCHASE_FAIL=after-charge): an error that is not final, so
   * the key is released and a retry (to a process without it) resumes after the recorded charge.
   */
  purchaseFailure?: 'after-charge';
  /** Run the reconciler in the app every this many seconds (RECONCILE_INTERVAL_SECONDS, default 60, on Lambda 0); 0: never. */
  reconcileIntervalSeconds?: number;
  /** The module's in-process replay cache (IDEMPOTENCY_REPLAY_CACHE, default on). */
  replayCache: boolean;
  /** The module's table check at startup (IDEMPOTENCY_STARTUP_CHECK, default on; docs/lambda.md measures it). */
  startupCheck: boolean;
  /** Create the tables if missing, with TTL on the idempotency table (CREATE_TABLES, default on; off: as deployed). */
  createTables: boolean;
  /** The module's `unkeyedCalls` (IDEMPOTENCY_UNKEYED_CALLS, default `warn`). */
  unkeyedCalls: 'warn' | 'error' | 'off';
  /** `dynamodb` (default) or `memory`: the in-memory repository, to measure the module without DynamoDB. */
  idempotencyStore: 'dynamodb' | 'memory';
  /** Serve the /bench routes and count DynamoDB calls (for `npm run bench`). */
  benchRoutes: boolean;
  /** With the bench routes: a provider has IdempotencyContext injected, so the module tracks calls (`npm run bench`). */
  benchTrackCalls: boolean;
  /** With the bench routes: the routes of n recovery points (`/bench/steps1`, `/bench/steps3`; `npm run bench`). */
  benchSteps: boolean;
  /** The lowest log level printed (LOG_LEVEL, default `verbose`: everything, as Nest prints by default). */
  logLevel: LowestLogLevel;
}

/** Nest's log levels, lowest first: LOG_LEVEL prints the one it names and those above it. */
export const LOG_LEVELS = ['verbose', 'debug', 'log', 'warn', 'error', 'fatal'] as const;
export type LowestLogLevel = (typeof LOG_LEVELS)[number];

export const ORDERS_API_CONFIG = Symbol('ORDERS_API_CONFIG');

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): OrdersApiConfig {
  const port = integer(env, 'PORT', 0) ?? 3000;
  const idempotencyTable = env.IDEMPOTENCY_TABLE || 'idempotency_keys';
  const idempotencyLayout = layoutFromEnv(env);
  return {
    platform: oneOf(env, 'PLATFORM', ['express', 'fastify'] as const),
    port,
    microservicePort: integer(env, 'MICROSERVICE_PORT', 0) ?? (port === 0 ? 0 : port + 1000),
    dynamoEndpoint: env.DYNAMODB_ENDPOINT || undefined,
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1',
    idempotencyTable,
    idempotencyLayout,
    ordersTable: env.ORDERS_TABLE || (idempotencyLayout.keySchema ? idempotencyTable : 'orders'),
    idempotencyTtlSeconds: integer(env, 'IDEMPOTENCY_TTL_SECONDS', 1),
    idempotencyPendingTtlSeconds: integer(env, 'IDEMPOTENCY_PENDING_TTL_SECONDS', 1),
    orderProcessingDelayMs: integer(env, 'ORDER_PROCESSING_DELAY_MS', 0) ?? 0,
    paymentsUrl: env.PAYMENTS_URL || undefined,
    checkoutDelayMs: integer(env, 'CHECKOUT_DELAY_MS', 0) ?? 0,
    purchasePause: pauseFromEnv(env.PURCHASE_PAUSE),
    purchaseFailure: env.PURCHASE_FAIL ? oneOf(env, 'PURCHASE_FAIL', ['after-charge'] as const) : undefined,
    // On AWS Lambda the reconciler is a scheduled job: the function is frozen between invocations.
    reconcileIntervalSeconds: (integer(env, 'RECONCILE_INTERVAL_SECONDS', 0) ?? (onLambda(env) ? 0 : 60)) || undefined,
    replayCache: flag(env, 'IDEMPOTENCY_REPLAY_CACHE', true),
    startupCheck: flag(env, 'IDEMPOTENCY_STARTUP_CHECK', true),
    createTables: flag(env, 'CREATE_TABLES', true),
    unkeyedCalls: oneOf(env, 'IDEMPOTENCY_UNKEYED_CALLS', ['warn', 'error', 'off'] as const),
    idempotencyStore: oneOf(env, 'IDEMPOTENCY_STORE', ['dynamodb', 'memory'] as const),
    benchRoutes: flag(env, 'BENCH_ROUTES', false),
    benchTrackCalls: flag(env, 'BENCH_TRACK_CALLS', false),
    benchSteps: flag(env, 'BENCH_STEPS', false),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS),
  };
}

function layoutFromEnv(env: NodeJS.ProcessEnv): TableLayoutOptions {
  const partitionKey = env.IDEMPOTENCY_PARTITION_KEY || undefined;
  const sortKey = env.IDEMPOTENCY_SORT_KEY || undefined;
  if (sortKey && !partitionKey) throw new Error('IDEMPOTENCY_SORT_KEY needs IDEMPOTENCY_PARTITION_KEY');
  return {
    ...(partitionKey ? { keySchema: { partitionKey, ...(sortKey ? { sortKey } : {}) } } : {}),
    ...(env.IDEMPOTENCY_KEY_PREFIX ? { keyPrefix: env.IDEMPOTENCY_KEY_PREFIX } : {}),
  };
}

function integer(env: NodeJS.ProcessEnv, name: string, min: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer ≥ ${min}, got "${raw}"`);
  return value;
}

function flag(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'on'].includes(raw)) return true;
  if (['0', 'false', 'off'].includes(raw)) return false;
  throw new Error(`${name} must be 1/true/on or 0/false/off, got "${raw}"`);
}

function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, values: readonly T[]): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return values[0];
  if (!values.includes(raw as T)) throw new Error(`${name} must be one of ${values.join(', ')}, got "${raw}"`);
  return raw as T;
}

function pauseFromEnv(value: string | undefined): OrdersApiConfig['purchasePause'] {
  if (!value) return undefined;
  const match = /^(after-charge|in-receipt):(\d+)$/.exec(value);
  if (!match)
    throw new Error(`PURCHASE_PAUSE must be after-charge:<ms> or in-receipt:<ms>, got ${JSON.stringify(value)}`);
  return { at: match[1] as 'after-charge' | 'in-receipt', ms: Number(match[2]) };
}
