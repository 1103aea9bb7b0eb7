import { Logger } from '@nestjs/common';
import type { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import type { UnkeyedCalls } from '../options/idempotency.options';

/** What kind of side effect went out without a key: an HTTP request, or a DynamoDB write. */
export type UnkeyedCallKind = 'http' | 'dynamodb';

/** One side effect a protected call sent without a key. */
export interface UnkeyedCall {
  /** An HTTP request, or a DynamoDB write. */
  kind: UnkeyedCallKind;
  /** The HTTP method (`POST`), or the DynamoDB operation (`PutItem`). */
  operation: string;
  /** The host (`payments.example:443`), or the table. */
  target: string;
}

/** Reported routes and targets kept per application; past this many, a new pair is still counted but not logged. */
const MAX_REPORTED = 1000;

/**
 * Thrown (with `unkeyedCalls: 'error'`) instead of sending a side effect a protected call sent without a key: a re-run
 * of the call after a crash or a lost lease would send it again, and its receiver could not tell.
 */
export class UnkeyedCallError extends Error {
  constructor(
    /** What was sent: its kind, method or operation, and host or table. */
    readonly call: UnkeyedCall,
    /** The protected call that sent it, as its reports name it (`POST /orders`, `fn charge-card`). */
    readonly route: string,
  ) {
    super(
      call.kind === 'http'
        ? `${route} sent ${call.operation} ${call.target} without an Idempotency-Key header: a re-run of this call ` +
            `would send it again. Pass a key (IdempotencyContext.deriveKey(name), or the client's { name }).`
        : `${route} sent ${call.operation} to table ${call.target} without a ConditionExpression: a re-run of this ` +
            `call would write again. Add a condition, or write it with IdempotencyContext.commitWith().`,
    );
    this.name = 'UnkeyedCallError';
  }
}

/**
 * One application's watch over unkeyed side effects (`unkeyedCalls`): a running claim carries it, and the
 * observers (`outgoing-requests.ts`, `dynamodb-writes.ts`) hand it what they see. It warns once per route and target,
 * counts every call, and with `'error'` answers the error that stops it.
 */
export class UnkeyedCallWatch {
  private static readonly logger = new Logger('Idempotency');
  private readonly reported = new Set<string>();
  /**
   * Lower-case names of the headers that carry a key: `idempotency-key`, `x-idempotency-key`, the module's own and
   * `downstreamKeyHeaders`.
   */
  readonly keyHeaders: ReadonlySet<string>;

  constructor(
    readonly mode: Exclude<UnkeyedCalls, 'off'>,
    keyHeaders: string[],
    private readonly telemetry: IdempotencyTelemetry,
  ) {
    this.keyHeaders = new Set([
      'idempotency-key',
      'x-idempotency-key',
      ...keyHeaders.map((name) => name.toLowerCase()),
    ]);
    telemetry.watchingUnkeyedCalls();
  }

  /** Reports a call of `route`; the error to stop it with in `'error'` mode, else undefined. */
  report(route: string, call: UnkeyedCall): UnkeyedCallError | undefined {
    this.telemetry.unkeyedCall(call.kind, call.operation);
    const seen = `${route}\0${call.kind}\0${call.operation}\0${call.target}`;
    if (this.mode === 'error') return new UnkeyedCallError(call, route);
    if (this.reported.has(seen) || this.reported.size >= MAX_REPORTED) return undefined;
    this.reported.add(seen);
    UnkeyedCallWatch.logger.warn({
      msg:
        call.kind === 'http'
          ? 'a protected call sent a request without an idempotency key: a re-run would send it again (docs/clients.md)'
          : 'a protected call wrote to DynamoDB without a condition: a re-run would write again (docs/clients.md)',
      route,
      kind: call.kind,
      [call.kind === 'http' ? 'method' : 'operation']: call.operation,
      [call.kind === 'http' ? 'host' : 'table']: call.target,
    });
    return undefined;
  }
}

/** What an observer needs of the running claim: its watch, and its route as reports name it. */
export interface WatchedClaim {
  watch?: UnkeyedCallWatch;
  route?: () => string;
}

/**
 * Reports what `describe` finds unkeyed (undefined: nothing) to the claim's watch, and answers the error to stop it
 * with. Never throws, whatever `describe` or the report does: the observers run inside the caller's request (a
 * channel's subscriber would surface it as an uncaught exception, a middleware would fail the write).
 */
export function judgedBy(
  claim: WatchedClaim | undefined,
  describe: (watch: UnkeyedCallWatch) => UnkeyedCall | undefined,
): UnkeyedCallError | undefined {
  const watch = claim?.watch;
  if (!watch) return undefined;
  try {
    const call = describe(watch);
    return call && watch.report(claim.route!(), call);
  } catch {
    return undefined;
  }
}
