import { DynamoDBClient, DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ExecutionContext } from '@nestjs/common';
import type { TableLayoutOptions } from '../dynamodb/table-layout';
import type { IdempotencyOutcomeEvent } from '../errors/outcomes';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import type { VersionChange } from '../repository/store-inputs';
import { EncryptionOptions } from '../response/response-sealing';

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
export const defaultStoreIf: StoreIf = (status) =>
  status < 400 || (status < 500 && !RETRYABLE_CLIENT_STATUSES.has(status));

/**
 * Options of `IdempotencyModule.forRoot()` / `forRootAsync()`. The table's layout (`keySchema`, `attributeNames`,
 * `keyPrefix`) lets the module share a table that has its own keys (single-table design, docs/single-table.md).
 */
export interface IdempotencyModuleOptions extends TableLayoutOptions {
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
   * How many owners of one key may crash on it (die, or run out their lease, without completing or releasing it) before
   * the next claim stores it as poisoned: the handler is not run again, and every duplicate gets 500 `key-poisoned`
   * until the record expires (`ttlSeconds`) or an operator releases it (`keys:release`). Default 3; 0 turns it off.
   */
  maxCrashedOwners?: number;
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
   * Called once per protected call with its outcome (executed, replayed, in-flight, mismatch …), its transport,
   * operation, record key, status and duration: business metrics, finding the record a request created. The same
   * events go to the `nestjs-dynamodb-idempotency:outcome` diagnostics channel. A hook that throws, or whose promise
   * rejects, never changes the answer nor ends the process (logged at most once a minute); keep it fast, it runs on
   * the request's path (an async one is not awaited).
   */
  onOutcome?: (event: IdempotencyOutcomeEvent) => void;
  /**
   * Side effects a protected call sends without a key, which a re-run would repeat (docs/clients.md): an HTTP request
   * other than GET, HEAD or OPTIONS without an `Idempotency-Key` header (`fetch`, `node:http`, axios), and a DynamoDB
   * `PutItem`, `UpdateItem` or `DeleteItem` without a `ConditionExpression` sent through a watched client (the
   * module's own, and any given to `watchUnkeyedWrites`). `'warn'` (default): a warning once per route and target,
   * and `idempotency_unkeyed_calls_total`. `'error'` (for tests): the call fails with an `UnkeyedCallError` (a
   * `fetch` or a DynamoDB write before it is sent). `'off'`: nothing is watched. Watching tracks protected calls through `AsyncLocalStorage`.
   */
  unkeyedCalls?: UnkeyedCalls;
  /**
   * Headers that carry an idempotency key on outgoing requests besides `Idempotency-Key`, `X-Idempotency-Key` and
   * `keyHeader`: a provider's own (`['PayPal-Request-Id']`). A request with one is not reported by `unkeyedCalls`.
   * Any letter case.
   */
  downstreamKeyHeaders?: string[];
  /**
   * The table is checked once at startup (`DescribeTable`: credentials, existence, key schema). `true` (default): a
   * problem fails application startup with the reason and the fix. `false`: it is only logged, for apps that must
   * start while DynamoDB is down (requests then answer 503 until it is back).
   */
  failOnStartup?: boolean;
  /**
   * Check the table when the application starts (`DescribeTable`, and whether the store has transactions). Default
   * true. `false` skips both (on AWS Lambda, a round trip of every cold start: docs/lambda.md; the first call then asks
   * about transactions itself); a missing table or permission shows on the first request, as a 500 `store-misconfigured`.
   */
  startupCheck?: boolean;
  /** Seal stored responses with AES-256-GCM (`node:crypto`). Off by default. */
  encryption?: EncryptionOptions;
  /** Replaces the DynamoDB repository, e.g. with `InMemoryIdempotencyRepository` in a unit test. */
  repository?: IdempotencyRepository;
  /** Run `IdempotencyReconciler.sweep()` every this many seconds in this process. Off by default. */
  reconcileIntervalSeconds?: number;
  /**
   * An in-process LRU of COMPLETED records, so hot replays cost no DynamoDB call. On by default, 1000 entries
   * (responses over 64 KB are not kept), each trusted for `maxAgeSeconds` (default 10) before the store is read again:
   * the longest a purge or forced release done by another process (`keys:purge`) goes unseen here. Lower it for purges
   * that take effect sooner, raise it for fewer reads of hot keys.
   */
  replayCache?: { enabled?: boolean; maxEntries?: number; maxAgeSeconds?: number };
  /**
   * With a sort key (`keySchema.sortKey`): the partition every record goes to, instead of the caller's scope (a fixed
   * string, or a function of the call). Default: the key prefix and a SHA-256 of the scope.
   */
  partitionKeyValue?: PartitionKeyValue;
}

/** What happens to a side effect a protected call sends without a key (`unkeyedCalls`). */
export type UnkeyedCalls = 'warn' | 'error' | 'off';

/** A record's partition in a sort-key layout: a fixed value, or a function of the call (like `scope`). */
export type PartitionKeyValue = string | ((context: ExecutionContext, request?: any) => string);

/**
 * How keys are scoped to callers: a function of the call, or `false` for keys unique by construction. `request` is the
 * HTTP request behind the call (an HTTP route, or a GraphQL operation over HTTP; undefined for message handlers), so
 * `(context, request) => request?.user?.id` works on every kind of route.
 */
export type Scope = ((context: ExecutionContext, request?: any) => string | number | undefined) | false;

/** Where an MCP tool call's key may be: its key argument, its `_meta` (`idempotency-key`), the HTTP request's header. */
export type McpKeySource = 'argument' | 'meta' | 'header';

/** How an `@Idempotent()` MCP tool reads its key and answers a replay. */
export interface McpToolOptions {
  /** Where the key is looked for, in order; the first found is the key. Default `['argument', 'meta', 'header']`. */
  keySources?: McpKeySource[];
  /** A replay's content starts with one line of text saying it is a replay (its `_meta` always says so). Default false. */
  replayText?: boolean;
}

/** Per-route options of `@Idempotent()`. */
/** How a call protects its key: claimed before the work (`lease`), or stored once after it (`optimistic`). */
export type IdempotencyMode = 'lease' | 'optimistic';

export interface IdempotentOptions {
  /** Overrides the module's `scope` for this route (e.g. `false` on a webhook keyed by the event id). */
  scope?: Scope;
  /** Overrides the module's `ttlSeconds` for this route. */
  ttlSeconds?: number;
  /** Overrides the module's `pendingTtlSeconds` for this route. */
  pendingTtlSeconds?: number;
  /** Overrides the module's `maxLeaseSeconds` for this route. */
  maxLeaseSeconds?: number;
  /** Overrides the module's `maxCrashedOwners` for this route (0: never poisoned). */
  maxCrashedOwners?: number;
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
   * What makes two requests with one key "the same", instead of everything the handler can read: any JSON value, taken
   * in canonical form (key order does not count). It gets what `key` gets (the HTTP request; a GraphQL mutation's
   * arguments; a message's data), e.g. `({ body }) => ({ amount: body.amount, currency: body.currency })`, so that a
   * retry whose `sentAt` changed replays instead of answering 422. What it leaves out can no longer be told apart.
   * Uploaded files stay in the fingerprint. A function that throws, returns a promise or a value that is not JSON
   * answers 500 `fingerprint-failed`; nothing is claimed. Default: the whole request.
   */
  fingerprint?: (request: any, context: ExecutionContext) => unknown;
  /**
   * While another request with the key is running: 0 (default) answers 409 at once; otherwise wait up to
   * this many milliseconds for its result, polling with consistent reads.
   */
  waitMs?: number;
  /** Overrides the module's `storeIf` for this route. */
  storeIf?: StoreIf;
  /**
   * GraphQL mutations: take the key from an argument (`{ arg: 'input.requestId' }`, a dotted path into the field's
   * arguments) instead of the `Idempotency-Key` header. MCP tools: the argument that carries the key (default
   * `idempotencyKey`).
   */
  keyFrom?: { arg: string };
  /** MCP tools (`@rekog/mcp-nest`): where the key is looked for, and how a replay reads (docs/mcp.md). */
  mcp?: McpToolOptions;
  /**
   * A stable operation name (`'orders.create'`), used in the record key and the fingerprint instead of the route
   * template, so that a retry through a refactored path or another version prefix still replays. Default: the route.
   */
  name?: string;
  /** Overrides the module's `partitionKeyValue` for this route (sort-key layouts). */
  partitionKeyValue?: PartitionKeyValue;
  /**
   * `'optimistic'`: no claim before the handler; its outcome is stored in one write after it (one DynamoDB call for
   * a first request), and concurrent duplicates may each run it. Only for handlers whose effects are `commitWith`
   * writes and `deriveKey`-keyed calls (docs/optimistic-mode.md). Default `'lease'`.
   */
  mode?: IdempotencyMode;
  /**
   * The version of the handler's steps (`'2'`, a release): written on the record at the claim. A run that would resume
   * steps another version recorded (renamed, reordered, reshaped) follows `onVersionChange`. Replays are unaffected.
   * Without it, any record's steps are resumed (docs/recovery-points.md).
   */
  version?: string;
  /**
   * With `version`, a run that would resume steps of another version: `'refuse'` (the default) answers 503
   * `version-mismatch` with `Retry-After` (during a rolling deploy, an instance of that version takes it); `'resume'`
   * resumes them; `'restart'` drops them and runs every step again (their effects too).
   */
  onVersionChange?: VersionChange;
}

/**
 * `@Idempotent()` on a provider's method (a queue processor, an event listener, a scheduled job, any injectable): its
 * calls run under the same protocol as `IdempotencyService.execute()`, keyed by a function of the method's arguments.
 * The module's `scope` does not apply (it reads an HTTP request); the method's own does.
 */
export interface IdempotentMethodOptions<A extends any[] = any[]> extends Omit<
  IdempotentOptions,
  'key' | 'fingerprint' | 'scope' | 'keyFrom' | 'partitionKeyValue' | 'required'
> {
  /**
   * The call's key, from the method's arguments (a message id, a job id, an event id, a tick's time). Required: there
   * is no header. A key function that throws or returns no key fails the call with the module's error
   * (`IdempotencyKeyInvalidError`, `IdempotencyKeyMissingError`); nothing is claimed and the method does not run.
   */
  key: (...args: A) => string | number | undefined;
  /**
   * What makes two calls with one key the same: any JSON value of the arguments. Default: the arguments themselves,
   * which must then be JSON (a framework object such as a BullMQ `Job` is not: give `(job) => job.data`).
   */
  fingerprint?: (...args: A) => unknown;
  /** A namespace for the key (a tenant, a consumer name): a constant, or a function of the arguments. Default none. */
  scope?: string | number | false | ((...args: A) => string | number | undefined);
  /** With a sort-key layout: the records' partition, instead of the key prefix and the scope's hash. */
  partitionKeyValue?: string;
}
