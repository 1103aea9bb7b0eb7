import { AsyncLocalStorage } from 'node:async_hooks';
import { Injectable } from '@nestjs/common';
import { DERIVE_KEY_HOOK } from '../client/derived-key';
import { IdempotencyReentrantCallError } from '../errors/idempotency.errors';
import { derivedKeyOf } from '../keys/derived-key';
import { CommitWrite, MAX_COMMIT_WRITES } from '../repository/commit-write';
import { PARAMTYPES_METADATA, PROPERTY_DEPS_METADATA, SELF_DECLARED_DEPS_METADATA } from '../nest-internals';
import type { InstanceWrapper } from '../nest-internals';
import type { UnkeyedCallWatch } from '../unkeyed-calls/unkeyed-call-watch';
import { checkStepOptions, StepFunction, StepOptions, StepRunner } from './step-runner';
import { UnrecordedSteps } from './unrecorded-steps';

/** The claim a protected call runs under, as the context exposes it. */
export interface RunningClaim {
  recordKey: string;
  /** The request's fingerprint: derived keys differ between different requests under one client key. */
  fingerprint: string;
  claimToken: string;
  /** Whether the repository can commit writes with the completion (it supports transactions). */
  canCommitWith: boolean;
  /** The writes given to `commitWith`, in order. */
  writes: CommitWrite[];
  /** False once the work has returned: later writes (from work it left running) would never be committed. */
  open: boolean;
  /** The application's watch over side effects sent without a key (`unkeyedCalls`), when it has one. */
  watch?: UnkeyedCallWatch;
  /** The call's route as reports name it (`POST /orders`, `fn charge-card`): asked only when one is made. */
  route?: () => string;
  /** The tracked protected call this one runs inside, if any: a call under a record key one of them holds re-enters. */
  parent?: RunningClaim;
  /** Where its steps run: recorded on the record as its owner, or run without a record (optimistic mode). */
  steps: StepRunner;
}

const claims = new AsyncLocalStorage<RunningClaim>();

/** The claim of the tracked protected call running here, if any (the unkeyed-call observers ask). */
export function runningClaim(): RunningClaim | undefined {
  return claims.getStore();
}

/**
 * Refuses a protected call under a record key that the call running here, or one it runs inside, holds: it would wait
 * on itself for ever (a method that calls itself with its key). Tracked calls only.
 */
export function refuseReentrant(recordKey: string): void {
  for (let claim = claims.getStore(); claim; claim = claim.parent) {
    if (claim.open && claim.recordKey === recordKey) {
      throw new IdempotencyReentrantCallError(claim.route?.() ?? recordKey);
    }
  }
}

// The retrying client (`nestjs-dynamodb-idempotency/client`, which imports nothing of Nest) asks the tracked call it
// runs in for `deriveKey(name)` here.
(globalThis as Record<symbol, unknown>)[DERIVE_KEY_HOOK] = (name: string): string | undefined => {
  const claim = claims.getStore();
  return claim && derivedKeyOf(claim, name);
};

/**
 * Runs `fn` with `claim` as the current one. `tracked`: through AsyncLocalStorage, so the injected
 * `IdempotencyContext` finds it anywhere in the work; otherwise only a context bound to it (`boundContext`) does.
 * On Node 20 and 22 AsyncLocalStorage adds work to every promise of the process, so the module tracks calls only
 * when something needs it (`CallTracking`): the watch over unkeyed side effects, or an injected `IdempotencyContext`.
 */
export function runInClaim<T>(claim: RunningClaim, fn: () => T, tracked: boolean): T {
  return tracked ? claims.run(claim, fn) : fn();
}

/** Contexts of applications that do not track calls: read, they explain why instead of answering "not in a call". */
const untracked = new WeakSet<IdempotencyContext>();

export function untrackContext(context: IdempotencyContext): void {
  untracked.add(context);
}

/** A context bound to one call (`IdempotencyService.execute` hands one to its function). */
export function boundContext(claim: RunningClaim): IdempotencyContext {
  return new BoundIdempotencyContext(claim);
}

/**
 * Whether a provider, controller, enhancer or middleware has `IdempotencyContext` injected: through its constructor
 * (by type, `@Inject()` or `forwardRef`), a property, or a factory's `inject`.
 */
export function injectsIdempotencyContext(wrapper: InstanceWrapper): boolean {
  const tokens: unknown[] = [...(wrapper.inject ?? [])];
  const type = wrapper.metatype;
  if (type && !wrapper.inject) {
    tokens.push(...(Reflect.getMetadata(PARAMTYPES_METADATA, type) ?? []));
    tokens.push(
      ...(Reflect.getMetadata(SELF_DECLARED_DEPS_METADATA, type) ?? []).map(
        (dependency: { param: unknown }) => dependency.param,
      ),
    );
    tokens.push(
      ...(Reflect.getMetadata(PROPERTY_DEPS_METADATA, type) ?? []).map(
        (dependency: { type: unknown }) => dependency.type,
      ),
    );
  }
  return tokens.some((token) => unwrapToken(token) === IdempotencyContext);
}

/** A token as written: a class or string, `forwardRef(() => X)`, or a factory's `{ token, optional }`. */
function unwrapToken(token: unknown): unknown {
  const written = token as { forwardRef?: () => unknown; token?: unknown } | undefined;
  if (typeof written?.forwardRef === 'function') return written.forwardRef();
  return typeof token === 'object' && token !== null && 'token' in token ? written!.token : token;
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
    return this.current() !== undefined;
  }

  /** The record key (scoped and hashed: never the raw client key). */
  get recordKey(): string {
    return this.running('recordKey').recordKey;
  }

  /** This attempt's claim token: changes when another caller takes the lease over. */
  get claimToken(): string {
    return this.running('claimToken').claimToken;
  }

  /** Whether `commitWith` can be used here: inside a protected call, on a store with transactions. */
  get canCommitWith(): boolean {
    return this.current()?.canCommitWith ?? false;
  }

  /**
   * A key for a call to another system (a payment provider's `Idempotency-Key`): the same for every run of this
   * record and `name`, so a re-run after a lost lease sends the provider the same key. Different across names and
   * records; derived by SHA-256 from the record key, never the raw client key or the claim token. 64 hex digits.
   */
  deriveKey(name: string): string {
    if (typeof name !== 'string' || name.length === 0)
      throw new TypeError('IdempotencyContext.deriveKey needs a name.');
    return derivedKeyOf(this.running('deriveKey'), name);
  }

  /**
   * A recovery point: runs `fn` once for this request and records what it returns before handing it back. A later run
   * of the same request (a retry after a crash, a lease taken over, a key released after an error) gets the recorded
   * result, of the types it had, without running `fn`. `fn` gets `key` (`deriveKey(name)`, for its downstream call's
   * own idempotency key) and `attempt` (how many times it has been started for this request). Names are unique within
   * a call. Outside a protected call (an optional key that is absent) and in optimistic mode, `fn` runs and nothing is
   * recorded. A step is at least once by default; `{ semantics: 'at-most-once', probe }` records its start first and
   * never runs `fn` blindly after an interrupted attempt (`StepOptions`). See docs/recovery-points.md.
   *
   * @example
   * ```ts
   * const charge = await this.idempotency.step('charge', ({ key }) => payments.charge(order, { idempotencyKey: key }));
   * ```
   */
  async step<T>(name: string, fn: StepFunction<T>, options?: StepOptions<T>): Promise<T> {
    checkStepOptions(name, options);
    const steps = this.current()?.steps ?? keylessSteps;
    return steps.step(name, fn, options);
  }

  /**
   * Commits `writes` in one `TransactWriteItems` with the completion (PENDING → COMPLETED, guarded by this claim):
   * they happen if and only if the key is completed with this call's response. They are not sent now; nothing is
   * written if the handler throws. At most 99 writes per call.
   */
  commitWith(...writes: CommitWrite[]): void {
    const claim = this.running('commitWith');
    if (!claim.open) {
      throw new Error('IdempotencyContext.commitWith: the call has already returned; its completion is being written.');
    }
    if (!claim.canCommitWith) {
      throw new Error(
        'IdempotencyContext.commitWith: this idempotency store has no transactions (dynalite, a multi-Region ' +
          'strongly consistent global table, or a repository without commit support), so the writes cannot be ' +
          'committed with the completion. Check canCommitWith ' +
          'and write them yourself when it is false.',
      );
    }
    for (const write of writes) {
      if (
        !write ||
        Object.keys(write).length !== 1 ||
        !['Put', 'Update', 'Delete', 'ConditionCheck'].includes(Object.keys(write)[0])
      ) {
        throw new TypeError(
          'IdempotencyContext.commitWith: each write is { Put }, { Update }, { Delete } or { ConditionCheck }.',
        );
      }
    }
    if (claim.writes.length + writes.length > MAX_COMMIT_WRITES) {
      throw new RangeError(
        `IdempotencyContext.commitWith: at most ${MAX_COMMIT_WRITES} writes per call (DynamoDB's 100 actions per ` +
          `transaction, one of which is the completion); this call has ${claim.writes.length + writes.length}.`,
      );
    }
    claim.writes.push(...writes);
  }

  /** This call's claim: the one this context is bound to, else the one AsyncLocalStorage carries. */
  private current(): RunningClaim | undefined {
    const claim = this instanceof BoundIdempotencyContext ? this.bound : claims.getStore();
    if (!claim && untracked.has(this)) {
      throw new Error(
        'IdempotencyContext: this application does not track protected calls, because no provider, controller, ' +
          'enhancer or middleware had IdempotencyContext injected at startup (a context taken with moduleRef.get() or ' +
          "app.get() does not count) and unkeyedCalls is 'off'. Inject it in the constructor of the class that uses it.",
      );
    }
    return claim;
  }

  private running(member: string): RunningClaim {
    const claim = this.current();
    if (!claim) {
      throw new Error(
        `IdempotencyContext.${member} is only available inside a protected call (an @Idempotent() handler with a ` +
          'key, or the function given to IdempotencyService.execute).',
      );
    }
    return claim;
  }
}

/** Steps outside any protected call: run, never recorded. */
const keylessSteps: StepRunner = {
  step: (name, fn, options) => new UnrecordedSteps().step(name, fn, options),
};

/** The context of one call, whatever the current async context: no AsyncLocalStorage lookup. */
class BoundIdempotencyContext extends IdempotencyContext {
  constructor(readonly bound: RunningClaim) {
    super();
  }
}
