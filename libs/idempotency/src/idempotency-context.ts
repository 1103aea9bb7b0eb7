import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { Injectable } from '@nestjs/common';

/**
 * One write of a handler's effects, in the DocumentClient's shape (`Put`, `Update`, `Delete` or `ConditionCheck`,
 * with plain JavaScript values), committed in one transaction with the completion (`IdempotencyContext.commitWith`).
 */
export type CommitWrite = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

/** DynamoDB allows 100 actions per transaction; the completion is one of them. */
export const MAX_COMMIT_WRITES = 99;

/** The claim a protected call runs under, as the context exposes it. */
export interface ClaimScope {
  recordKey: string;
  claimToken: string;
  /** Whether the repository can commit writes with the completion (it supports transactions). */
  canCommitWith: boolean;
  /** The writes given to `commitWith`, in order. */
  writes: CommitWrite[];
  /** False once the work has returned: later writes (from work it left running) would never be committed. */
  open: boolean;
}

const scopes = new AsyncLocalStorage<ClaimScope>();

/** Runs `fn` with `scope` as the current claim (for the context of the work it starts). */
export function runInClaim<T>(scope: ClaimScope, fn: () => T): T {
  return scopes.run(scope, fn);
}

/**
 * The claim the current protected call runs under, wherever the handler is (inject it anywhere; it reads the
 * call through `AsyncLocalStorage`). `IdempotencyService.execute` hands the same object to its function.
 *
 * @example
 * ```ts
 * constructor(private readonly idempotency: IdempotencyContext) {}
 *
 * @Post() @Idempotent()
 * create(@Body() order: NewOrder) {
 *   this.idempotency.commitWith({
 *     Put: { TableName: 'orders', Item: { id: order.id, ...order }, ConditionExpression: 'attribute_not_exists(id)' },
 *   });
 *   return order; // the order is written if and only if the key is COMPLETED with this response
 * }
 * ```
 */
@Injectable()
export class IdempotencyContext {
  /** True inside a protected call that owns its key (not for a handler run without a key, or outside a call). */
  get active(): boolean {
    return scopes.getStore() !== undefined;
  }

  /** The record's partition key (scoped and hashed: never the raw client key). */
  get recordKey(): string {
    return this.scope('recordKey').recordKey;
  }

  /** This attempt's claim token: changes when another caller takes the lease over. */
  get claimToken(): string {
    return this.scope('claimToken').claimToken;
  }

  /** Whether `commitWith` can be used here: inside a protected call, on a store with transactions. */
  get canCommitWith(): boolean {
    return scopes.getStore()?.canCommitWith ?? false;
  }

  /**
   * A key for a call to another system (a payment provider's `Idempotency-Key`): the same for every run of this
   * record and `name`, so a re-run after a lost lease sends the provider the same key. Different across names and
   * records; derived by SHA-256 from the record key, never the raw client key or the claim token. 64 hex digits.
   */
  deriveKey(name: string): string {
    if (typeof name !== 'string' || name.length === 0) throw new TypeError('IdempotencyContext.deriveKey needs a name.');
    const { recordKey } = this.scope('deriveKey');
    return createHash('sha256').update(`derived\0${recordKey}\0${name}`).digest('hex');
  }

  /**
   * Commits `writes` in one `TransactWriteItems` with the completion (PENDING → COMPLETED, guarded by this claim):
   * they happen if and only if the key is completed with this call's response. They are not sent now; nothing is
   * written if the handler throws. At most 99 writes per call.
   */
  commitWith(...writes: CommitWrite[]): void {
    const scope = this.scope('commitWith');
    if (!scope.open) {
      throw new Error('IdempotencyContext.commitWith: the call has already returned; its completion is being written.');
    }
    if (!scope.canCommitWith) {
      throw new Error(
        'IdempotencyContext.commitWith: this idempotency store has no transactions (dynalite, or a repository ' +
          'without commit support), so the writes cannot be committed with the completion. Check canCommitWith ' +
          'and write them yourself when it is false.',
      );
    }
    for (const write of writes) {
      if (!write || Object.keys(write).length !== 1 || !['Put', 'Update', 'Delete', 'ConditionCheck'].includes(Object.keys(write)[0])) {
        throw new TypeError('IdempotencyContext.commitWith: each write is { Put }, { Update }, { Delete } or { ConditionCheck }.');
      }
    }
    if (scope.writes.length + writes.length > MAX_COMMIT_WRITES) {
      throw new RangeError(
        `IdempotencyContext.commitWith: at most ${MAX_COMMIT_WRITES} writes per call (DynamoDB's 100 actions per ` +
          `transaction, one of which is the completion); this call has ${scope.writes.length + writes.length}.`,
      );
    }
    scope.writes.push(...writes);
  }

  private scope(member: string): ClaimScope {
    const scope = scopes.getStore();
    if (!scope) {
      throw new Error(
        `IdempotencyContext.${member} is only available inside a protected call (an @Idempotent() handler with a ` +
          'key, or the function given to IdempotencyService.execute).',
      );
    }
    return scope;
  }
}
