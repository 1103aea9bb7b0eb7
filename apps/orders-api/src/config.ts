/** The demo's settings, all from the environment (see the README). */
export interface OrdersApiConfig {
  port: number;
  /** The TCP microservice transport of the payments consumer. */
  microservicePort: number;
  /** Unset: an embedded dynalite is started in-process. */
  dynamoEndpoint?: string;
  region: string;
  idempotencyTable: string;
  ordersTable: string;
  idempotencyTtlSeconds?: number;
  idempotencyPendingTtlSeconds?: number;
  /** A simulated slow payment step inside POST /orders. */
  orderProcessingDelayMs: number;
  /** Run the reconciler in the app every this many seconds; unset: never. */
  reconcileIntervalSeconds?: number;
}

export const ORDERS_API_CONFIG = Symbol('ORDERS_API_CONFIG');

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): OrdersApiConfig {
  const port = integer(env, 'PORT', 0) ?? 3000;
  return {
    port,
    microservicePort: integer(env, 'MICROSERVICE_PORT', 0) ?? (port === 0 ? 0 : port + 1000),
    dynamoEndpoint: env.DYNAMODB_ENDPOINT || undefined,
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1',
    idempotencyTable: env.IDEMPOTENCY_TABLE || 'idempotency_keys',
    ordersTable: env.ORDERS_TABLE || 'orders',
    idempotencyTtlSeconds: integer(env, 'IDEMPOTENCY_TTL_SECONDS', 1),
    idempotencyPendingTtlSeconds: integer(env, 'IDEMPOTENCY_PENDING_TTL_SECONDS', 1),
    orderProcessingDelayMs: integer(env, 'ORDER_PROCESSING_DELAY_MS', 0) ?? 0,
    reconcileIntervalSeconds: integer(env, 'IDEMPOTENCY_RECONCILE_INTERVAL_SECONDS', 1),
  };
}

function integer(env: NodeJS.ProcessEnv, name: string, min: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer ≥ ${min}, got "${raw}"`);
  return value;
}
