import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  IdempotencyError,
  IdempotencyFingerprintFailedError,
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyScopeFailedError,
} from '../errors/idempotency.errors';
import { fingerprintValue } from '../keys/fingerprint';
import { validateKey } from '../keys/idempotency-key';
import { recordKey, scopePartition, scopeText } from '../keys/record-key';
import { PartitionKeyValue, Scope } from '../options/idempotency.options';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { IdempotencyService, ProtectedCall } from '../protocol/idempotency.service';
import { RecordLocation } from '../repository/idempotency.repository';
import { ContextAdapter, InterceptedCall } from './context-adapter';

/**
 * A protected call as the protocol needs it, whatever its execution type: its key (missing, malformed, or from a
 * function that throws: a problem, never a raw error), its scope (the caller's key space), its partition in a sort-key
 * layout, its record key and its fingerprint.
 */
@Injectable()
export class CallDescriber {
  private readonly logger = new Logger('Idempotency');
  /** Handlers already warned that their keys are shared across authenticated callers. */
  private readonly unscopedWarned = new WeakSet<Function>();

  constructor(
    private readonly service: IdempotencyService,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /**
   * The call; undefined when an optional key is absent (the handler then runs unprotected). A promise only when its
   * fingerprint has to wait (uploaded files on disk).
   */
  describe(call: InterceptedCall, adapter: ContextAdapter): ProtectedCall | undefined | Promise<ProtectedCall> {
    const operation = adapter.operation(call);
    const location = this.locate(call, adapter, operation);
    if (location === undefined) return undefined;
    const { key: record, partition } = location;
    const settings = partition === undefined ? call.route : { ...call.route, partition };
    const chosen = call.route.fingerprint && this.chosenFingerprint(call, adapter, operation);
    const fingerprint = adapter.fingerprint(call, chosen);
    if (typeof fingerprint === 'string') return this.service.call(record, fingerprint, settings);
    return fingerprint.then((digest) => this.service.call(record, digest, settings));
  }

  /**
   * Where the call's record is: its operation, the caller's scope and key, and its partition in a sort-key layout.
   * Undefined when an optional key is absent; a missing required one is a 400.
   */
  locate(call: InterceptedCall, adapter: ContextAdapter, operation: string): RecordLocation | undefined {
    const key = this.keyOf(call, adapter);
    if (key === undefined) {
      if (call.route.required === false) return undefined;
      throw new IdempotencyKeyMissingError(adapter.missingKey(call));
    }
    const request = adapter.request(call);
    const scope = this.scopeOf(call, request, operation, adapter.defaultScope);
    const partition = this.options.layout.sortKey ? this.partitionOf(call, request, scope, operation) : undefined;
    return { key: recordKey(operation, scope, key), partition };
  }

  /** The caller's key, validated. A key function that throws is an invalid key (400), logged, never a raw error. */
  private keyOf(call: InterceptedCall, adapter: ContextAdapter): string | undefined {
    let key: unknown;
    try {
      key = adapter.key(call);
    } catch (error) {
      if (error instanceof IdempotencyError) throw error;
      const msg = 'the key function threw; answering 400 key-invalid';
      this.logger.warn({ msg, operation: adapter.operation(call), error: String(error) });
      throw new IdempotencyKeyInvalidError('it could not be derived from the request');
    }
    return validateKey(key);
  }

  /**
   * The digest of the route's `fingerprint` function's value (canonical JSON). One that throws, returns a promise or a
   * value that is not JSON answers 500 fingerprint-failed (logged): nothing is claimed, the handler does not run.
   */
  private chosenFingerprint(call: InterceptedCall, adapter: ContextAdapter, operation: string): string {
    try {
      const value: unknown = call.route.fingerprint!(adapter.input(call), call.context);
      if (value === undefined)
        throw new TypeError('it returned undefined; return the value that identifies the request');
      if (typeof (value as { then?: unknown } | null)?.then === 'function') {
        throw new TypeError('it returned a promise; return the value itself');
      }
      return fingerprintValue(value);
    } catch (error) {
      this.logger.error({
        msg: 'the fingerprint function failed; answering 500 fingerprint-failed, the handler does not run',
        operation,
        error: String(error),
      });
      throw new IdempotencyFingerprintFailedError(operation);
    }
  }

  /**
   * The caller's scope (the route's function, else the module's, else the adapter's), warning when authenticated callers
   * share keys.
   */
  private scopeOf(call: InterceptedCall, request: unknown, operation: string, fallback?: Scope): string | undefined {
    const scope: Scope | undefined = call.route.scope ?? this.options.scope ?? fallback;
    const user = (request as { user?: unknown } | undefined)?.user;
    if (scope === undefined && user !== undefined && user !== null) this.warnUnscoped(call, operation);
    if (!scope) return undefined;
    const value: unknown = this.applyFunction('scope', () => scope(call.context, request), operation);
    try {
      return scopeText(value);
    } catch (error) {
      this.logger.error({
        msg: `the scope function returned an unusable value; answering 500 scope-failed: ${(error as Error).message}`,
        operation,
      });
      throw new IdempotencyScopeFailedError(operation);
    }
  }

  /** The record's partition in a sort-key layout: `partitionKeyValue`, else the key prefix and the scope's hash. */
  private partitionOf(call: InterceptedCall, request: unknown, scope: string | undefined, operation: string): string {
    const value: PartitionKeyValue | undefined = call.route.partitionKeyValue ?? this.options.partitionKeyValue;
    if (value === undefined) return scopePartition(this.options.layout.keyPrefix, scope);
    if (typeof value === 'string') return value;
    const partition = this.applyFunction('partitionKeyValue', () => value(call.context, request), operation);
    if (typeof partition === 'string' && partition.length > 0) return partition;
    this.logger.error({ msg: 'partitionKeyValue returned no partition; answering 500 scope-failed', operation });
    throw new IdempotencyScopeFailedError(operation);
  }

  /** An application function of the call; one that throws answers 500 scope-failed (logged): the handler does not run. */
  private applyFunction<T>(name: string, apply: () => T, operation: string): T {
    try {
      return apply();
    } catch (error) {
      const msg = `the ${name} function threw; answering 500 scope-failed, the handler does not run`;
      this.logger.error({ msg, operation, error: String(error) });
      throw new IdempotencyScopeFailedError(operation);
    }
  }

  private warnUnscoped({ context }: InterceptedCall, operation: string): void {
    if (this.unscopedWarned.has(context.getHandler())) return;
    this.unscopedWarned.add(context.getHandler());
    this.logger.warn(
      `${operation}: requests carry an authenticated user (req.user) but no scope is configured, so every caller shares one ` +
        "key space and a user who sends another user's key gets that user's response. Set scope, e.g. " +
        '(context, request) => request?.user?.id, or scope: false when keys are unique by construction.',
    );
  }
}
