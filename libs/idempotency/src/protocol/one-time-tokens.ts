import { Inject, Injectable } from '@nestjs/common';
import { checkOperationFits, recordKey, scopePartition, scopeText } from '../keys/record-key';
import { positiveSeconds } from '../options/option-checks';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { IdempotencyRepository } from '../repository/idempotency.repository';

/** How a one-time token is consumed. */
export interface ConsumeOnceOptions {
  /** What the token is for (`'mcp request state'`, `'password reset'`): tokens of two purposes never collide. */
  purpose?: string;
  /** The caller the token belongs to, as a route's scope: the same token of two callers is two tokens. */
  scope?: string | number;
  /**
   * How long the consumption is remembered: longer than the token is valid, or an expired record lets it be consumed
   * again. Default: the module's `ttlSeconds`.
   */
  ttlSeconds?: number;
}

/**
 * One-time tokens (an MCP multi round-trip request's `requestState`, a confirmation link, a nonce): `consume(token)` is
 * true for the first caller across every process on the table, and false for every other, with one conditional write.
 * The token is hashed into the record key, never stored.
 */
@Injectable()
export class OneTimeTokens {
  constructor(
    private readonly repository: IdempotencyRepository,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /** True when this call consumed the token; false when it was consumed before (by any instance on the table). */
  async consume(token: string, options: ConsumeOnceOptions = {}): Promise<boolean> {
    if (typeof token !== 'string' || token.length === 0) {
      throw new TypeError('OneTimeTokens.consume: the token must be a non-empty string');
    }
    const ttlSeconds =
      options.ttlSeconds === undefined
        ? this.options.ttlSeconds
        : positiveSeconds('ttlSeconds', options.ttlSeconds, 'OneTimeTokens.consume');
    const { purpose = 'token' } = options;
    if (typeof purpose !== 'string' || purpose.length === 0) {
      throw new TypeError(`OneTimeTokens.consume: the purpose must be a non-empty string, got ${String(purpose)}`);
    }
    const { layout, clockSkewSeconds } = this.options;
    checkOperationFits(`once ${purpose}`, 'purpose', 'OneTimeTokens.consume', layout);
    const scope = scopeText(options.scope);
    const result = await this.repository.putCompleted({
      key: recordKey(`once ${purpose}`, scope, token),
      partition: layout.sortKey ? scopePartition(layout.keyPrefix, scope) : undefined,
      fingerprint: 'consumed',
      response: { statusCode: 200, headers: {} },
      ttlSeconds,
      clockSkewSeconds,
    });
    return result.ok;
  }
}
