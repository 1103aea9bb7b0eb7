import { STORE_RETRY_AFTER_SECONDS } from '../idempotency.constants';

/** The outcomes that answer a call with a problem instead of a run or a replay (`IdempotencyError.outcome`). */
export type ProblemOutcome =
  | 'missing_key'
  | 'invalid_key'
  | 'invalid_request'
  | 'mismatch'
  | 'in_flight'
  | 'lease_lost'
  | 'commit_rejected'
  | 'response_not_stored'
  | 'record_unreadable'
  | 'body_unreadable'
  | 'scope_failed'
  | 'fingerprint_failed'
  | 'reentrant_call'
  | 'key_poisoned'
  | 'step_outcome_unknown'
  | 'version_mismatch'
  | 'outcome_not_found'
  | 'store_misconfigured'
  | 'store_throttled'
  | 'store_unavailable';

/** What happened to one call of a protected handler: the `outcome` label of `idempotency_requests_total`. */
export type RequestOutcome = 'executed' | 'replayed' | ProblemOutcome;

/** How one problem outcome is answered. */
export interface ProblemRow {
  /** Its name in outcome events (`onOutcome`, the diagnostics channel). */
  event: string;
  /** The last part of the problem's `type` (`urn:nestjs-dynamodb-idempotency:<slug>`) and of the GraphQL code. */
  slug: string;
  title: string;
  status: number;
  /** `Retry-After`: seconds, or `lease` for the error's own (`retryAfterSeconds`). Absent: retrying will not help. */
  retryAfter?: number | 'lease';
  /** What the client reads; absent, the error's own message. */
  detail?: string;
}

const inFlight = {
  slug: 'in-flight',
  title: 'Request in progress',
  status: 409,
  retryAfter: 'lease',
  detail: 'A request with this idempotency key is still being processed. Retry after the indicated delay.',
} as const;

/**
 * Every problem outcome and how it is answered: the problem `type`, title and status over HTTP, the `RpcException` of
 * message handlers, the GraphQL `extensions.code`, the metric label and the README's outcome table all come from this
 * one table. An outcome without a row does not compile.
 */
export const PROBLEMS = {
  missing_key: { event: 'missing-key', slug: 'key-missing', title: 'Idempotency key missing', status: 400 },
  invalid_key: { event: 'invalid-key', slug: 'key-invalid', title: 'Idempotency key invalid', status: 400 },
  invalid_request: {
    event: 'invalid-request',
    slug: 'request-invalid',
    title: 'Request cannot be fingerprinted',
    status: 400,
  },
  mismatch: {
    event: 'mismatch',
    slug: 'fingerprint-mismatch',
    title: 'Idempotency key reused with a different request',
    status: 422,
    detail: 'This idempotency key was already used with a different request. Use a new key for a new request.',
  },
  in_flight: { ...inFlight, event: 'in-flight' },
  lease_lost: { ...inFlight, event: 'lease-lost' },
  commit_rejected: {
    event: 'commit-rejected',
    slug: 'commit-rejected',
    title: 'Request rejected by a write condition',
    status: 409,
  },
  response_not_stored: {
    event: 'not-stored',
    slug: 'response-not-stored',
    title: 'Request already processed',
    status: 409,
  },
  record_unreadable: {
    event: 'record-unreadable',
    slug: 'record-unreadable',
    title: 'Stored response unreadable',
    status: 500,
    detail:
      'A request with this idempotency key was processed, but its stored response cannot be read. ' +
      'It will not be processed again.',
  },
  body_unreadable: {
    event: 'body-unreadable',
    slug: 'body-unreadable',
    title: 'Unsupported request body',
    status: 415,
    detail:
      'The request body could not be read for this operation (its content type is not one the operation accepts). ' +
      'The request was not processed.',
  },
  scope_failed: { event: 'scope-failed', slug: 'scope-failed', title: 'Idempotency scope failed', status: 500 },
  fingerprint_failed: {
    event: 'fingerprint-failed',
    slug: 'fingerprint-failed',
    title: 'Idempotency fingerprint failed',
    status: 500,
  },
  reentrant_call: {
    event: 'reentrant-call',
    slug: 'reentrant-call',
    title: 'Idempotent call re-entered',
    status: 500,
  },
  key_poisoned: {
    event: 'key-poisoned',
    slug: 'key-poisoned',
    title: 'Idempotency key poisoned',
    status: 500,
  },
  step_outcome_unknown: {
    event: 'step-outcome-unknown',
    slug: 'step-outcome-unknown',
    title: 'Step outcome unknown',
    status: 500,
  },
  version_mismatch: {
    event: 'version-mismatch',
    slug: 'version-mismatch',
    title: 'Recorded steps of another version',
    status: 503,
    retryAfter: 'lease',
  },
  outcome_not_found: {
    event: 'outcome-not-found',
    slug: 'outcome-not-found',
    title: 'No outcome for this idempotency key',
    status: 404,
  },
  store_misconfigured: {
    event: 'misconfigured',
    slug: 'store-misconfigured',
    title: 'Idempotency store misconfigured',
    status: 500,
    detail:
      'The request was not processed because the idempotency store refused it in a way retrying will not fix. ' +
      'The operator has been told (logs).',
  },
  store_throttled: {
    event: 'throttled',
    slug: 'store-throttled',
    title: 'Idempotency store throttled',
    status: 503,
    retryAfter: STORE_RETRY_AFTER_SECONDS,
    detail: 'The request was not processed because the idempotency store is throttling. Retry with the same key.',
  },
  store_unavailable: {
    event: 'unavailable',
    slug: 'store-unavailable',
    title: 'Idempotency store unavailable',
    status: 503,
    retryAfter: STORE_RETRY_AFTER_SECONDS,
    detail: 'The request was not processed because the idempotency store is unavailable. Retry with the same key.',
  },
} as const satisfies Record<ProblemOutcome, ProblemRow>;

type Slug = (typeof PROBLEMS)[ProblemOutcome]['slug'];
type CamelCase<S extends string> = S extends `${infer Head}-${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : S;

/** A problem `type` URI: `urn:nestjs-dynamodb-idempotency:` and the outcome's slug. */
export type ProblemTypeUri = `urn:nestjs-dynamodb-idempotency:${Slug}`;

export function problemTypeUri(slug: Slug): ProblemTypeUri {
  return `urn:nestjs-dynamodb-idempotency:${slug}`;
}

const camelCase = (slug: string) => slug.replace(/-(\w)/g, (_, letter: string) => letter.toUpperCase());

/** The stable problem types (RFC 9457 `type`), by name: `ProblemType.inFlight` is `urn:nestjs-dynamodb-idempotency:in-flight`. */
export const ProblemType = Object.freeze(
  Object.fromEntries(Object.values(PROBLEMS).map(({ slug }) => [camelCase(slug), problemTypeUri(slug)])),
) as { readonly [S in Slug as CamelCase<S>]: `urn:nestjs-dynamodb-idempotency:${S}` };

/** The names of outcome events: a run, a replay, or a problem's `event`. */
export type OutcomeEventName =
  | 'executed'
  | 'replayed'
  | (typeof PROBLEMS)[ProblemOutcome]['event']
  /** An operator's step surgery (`keys:restart --from-step`, `keys:resolve-step`): `transport` is `admin`. */
  | 'step-surgery';

/** An outcome's event name. */
export function outcomeEventName(outcome: RequestOutcome): OutcomeEventName {
  return outcome === 'executed' || outcome === 'replayed' ? outcome : PROBLEMS[outcome].event;
}

/** The event source of a Lambda batch's record (`processBatch`). */
export type BatchTransport = 'sqs' | 'kinesis' | 'dynamodb-streams';

/**
 * One protected call's outcome, as `onOutcome` and the `nestjs-dynamodb-idempotency:outcome` diagnostics channel
 * receive it: one event per call, built only when one of them listens.
 */
export interface IdempotencyOutcomeEvent {
  outcome: OutcomeEventName;
  /**
   * How the call came in: an HTTP route, a GraphQL mutation, a message handler, an MCP tool, `IdempotencyService.execute`,
   * a provider's `@Idempotent()` method, a record of a Lambda batch (`processBatch`).
   */
  transport: 'http' | 'graphql' | 'rpc' | 'mcp' | 'function' | 'method' | 'admin' | BatchTransport;
  /** `POST /orders`, the route's `name`, `GraphQL Mutation.pay`, `RPC "pattern"`, `fn charge-card`, `OrdersConsumer.handle`. */
  operation: string;
  /** The record key (hashed: never the client's key); absent when the call has none (a missing key). */
  recordKey?: string;
  /** Its partition, in a sort-key layout. */
  partition?: string;
  /** The status answered: the handler's (executed), the stored one (replayed), the problem's. */
  statusCode?: number;
  /** From the call's start to its outcome. */
  durationMs: number;
  mode: 'lease' | 'optimistic';
  /** An operator's command (`transport: 'admin'`): who ran it (the access key of its AWS credentials, in the CLI). */
  operator?: string;
}
