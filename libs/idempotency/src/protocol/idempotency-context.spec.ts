import { createHash } from 'node:crypto';
import { forwardRef, Inject, Injectable } from '@nestjs/common';
import type { InstanceWrapper } from '../nest-internals';
import { CommitWrite, MAX_COMMIT_WRITES } from '../repository/commit-write';
import {
  boundContext,
  IdempotencyContext,
  injectsIdempotencyContext,
  RunningClaim,
  untrackContext,
} from './idempotency-context';
import { UnrecordedSteps } from './unrecorded-steps';

const put = (id: string): CommitWrite => ({ Put: { TableName: 'orders', Item: { id } } });

function claim(overrides: Partial<RunningClaim> = {}): RunningClaim {
  return {
    recordKey: 'POST /orders#abc',
    fingerprint: 'f'.repeat(64),
    claimToken: 'token',
    canCommitWith: true,
    writes: [],
    open: true,
    steps: new UnrecordedSteps({ recordKey: 'POST /orders#abc', fingerprint: 'f'.repeat(64) }),
    ...overrides,
  };
}

describe('IdempotencyContext bound to a call', () => {
  it('derives a provider key as SHA-256 of the record key, the fingerprint and the name: the same for every run of one request', () => {
    const context = boundContext(claim());
    const fingerprint = 'f'.repeat(64);
    const expected = createHash('sha256').update(`derived\0POST /orders#abc\0${fingerprint}\0provider`).digest('hex');
    expect(context.deriveKey('provider')).toBe(expected);
    // Another request under the same client key (it restarted a FAILED record) gets other keys.
    expect(boundContext(claim({ fingerprint: 'e'.repeat(64) })).deriveKey('provider')).not.toBe(expected);
  });

  it('refuses to derive a key without a name', () => {
    const context = boundContext(claim());
    expect(() => context.deriveKey('')).toThrow(new TypeError('IdempotencyContext.deriveKey needs a name.'));
    expect(() => context.deriveKey(undefined as unknown as string)).toThrow(/deriveKey needs a name/);
  });

  it('keeps each kind of write, in order', () => {
    const running = claim();
    const writes: CommitWrite[] = [
      put('a'),
      { Update: { TableName: 'orders', Key: { id: 'b' }, UpdateExpression: 'SET n = :n' } },
      { Delete: { TableName: 'orders', Key: { id: 'c' } } },
      { ConditionCheck: { TableName: 'orders', Key: { id: 'd' }, ConditionExpression: 'attribute_exists(id)' } },
    ];
    boundContext(running).commitWith(...writes.slice(0, 2));
    boundContext(running).commitWith(...writes.slice(2));
    expect(running.writes).toEqual(writes);
  });

  it.each([
    ['nothing', undefined],
    ['an empty object', {}],
    ['two actions in one', { ...put('a'), Delete: { TableName: 'orders', Key: { id: 'a' } } }],
    ['an unknown action', { Upsert: { TableName: 'orders' } }],
  ])('refuses %s as a write, and keeps none of the call', (_, write) => {
    const running = claim();
    expect(() => boundContext(running).commitWith(put('a'), write as unknown as CommitWrite)).toThrow(
      new TypeError(
        'IdempotencyContext.commitWith: each write is { Put }, { Update }, { Delete } or { ConditionCheck }.',
      ),
    );
    expect(running.writes).toEqual([]);
  });

  it(`takes ${MAX_COMMIT_WRITES} writes per call, and refuses one more with the count`, () => {
    const running = claim();
    const context = boundContext(running);
    context.commitWith(...Array.from({ length: MAX_COMMIT_WRITES - 1 }, (_, i) => put(`o${i}`)));
    context.commitWith(put('last'));
    expect(running.writes).toHaveLength(MAX_COMMIT_WRITES);
    expect(() => context.commitWith(put('one more'))).toThrow(
      new RangeError(
        `IdempotencyContext.commitWith: at most ${MAX_COMMIT_WRITES} writes per call (DynamoDB's 100 actions per ` +
          `transaction, one of which is the completion); this call has ${MAX_COMMIT_WRITES + 1}.`,
      ),
    );
    expect(running.writes).toHaveLength(MAX_COMMIT_WRITES);
  });

  it('refuses writes on a store without transactions, saying what to do instead', () => {
    const context = boundContext(claim({ canCommitWith: false }));
    expect(context.active).toBe(true);
    expect(context.canCommitWith).toBe(false);
    expect(() => context.commitWith(put('a'))).toThrow(
      new Error(
        'IdempotencyContext.commitWith: this idempotency store has no transactions (dynalite, a multi-Region ' +
          'strongly consistent global table, or a repository without commit support), so the writes cannot be ' +
          'committed with the completion. Check canCommitWith ' +
          'and write them yourself when it is false.',
      ),
    );
  });
});

describe('IdempotencyContext outside a call', () => {
  const outside = (member: string) =>
    new Error(
      `IdempotencyContext.${member} is only available inside a protected call (an @Idempotent() handler with a ` +
        'key, or the function given to IdempotencyService.execute).',
    );

  it('is inactive, cannot commit, and each member names itself when read', () => {
    const context = new IdempotencyContext();
    expect(context.active).toBe(false);
    expect(context.canCommitWith).toBe(false);
    expect(() => context.recordKey).toThrow(outside('recordKey'));
    expect(() => context.claimToken).toThrow(outside('claimToken'));
    expect(() => context.deriveKey('provider')).toThrow(outside('deriveKey'));
    expect(() => context.commitWith(put('a'))).toThrow(outside('commitWith'));
  });

  it('explains, in an application that tracks no calls, why it cannot know the call and what to do', () => {
    const context = new IdempotencyContext();
    untrackContext(context);
    const why = new Error(
      'IdempotencyContext: this application does not track protected calls, because no provider, controller, ' +
        'enhancer or middleware had IdempotencyContext injected at startup (a context taken with moduleRef.get() or ' +
        "app.get() does not count) and unkeyedCalls is 'off'. Inject it in the constructor of the class that uses it.",
    );
    expect(() => context.active).toThrow(why);
    expect(() => context.recordKey).toThrow(why);
  });
});

@Injectable()
class Service {}

@Injectable()
class ByConstructor {
  constructor(readonly context: IdempotencyContext) {}
}

@Injectable()
class ByInjectToken {
  constructor(@Inject(IdempotencyContext) readonly context: unknown) {}
}

@Injectable()
class ByForwardRef {
  constructor(@Inject(forwardRef(() => IdempotencyContext)) readonly context: unknown) {}
}

@Injectable()
class ByProperty {
  @Inject() readonly context!: IdempotencyContext;
}

const wrapper = (fields: { metatype?: Function; inject?: unknown[] }) => fields as unknown as InstanceWrapper;

describe('injectsIdempotencyContext', () => {
  it.each([
    ['a constructor parameter, by type', wrapper({ metatype: ByConstructor })],
    ['a constructor parameter, by @Inject() token', wrapper({ metatype: ByInjectToken })],
    ['a constructor parameter, by forwardRef', wrapper({ metatype: ByForwardRef })],
    ['a property', wrapper({ metatype: ByProperty })],
    ["a factory's inject", wrapper({ metatype: () => ({}), inject: [IdempotencyContext] })],
    [
      "a factory's inject, as { token, optional }",
      wrapper({ inject: [{ token: IdempotencyContext, optional: true }] }),
    ],
    ["a factory's inject, by forwardRef", wrapper({ inject: [forwardRef(() => IdempotencyContext)] })],
  ])('sees it injected through %s', (_, injected) => {
    expect(injectsIdempotencyContext(injected)).toBe(true);
  });

  it.each([
    ['a class that injects something else', wrapper({ metatype: Service })],
    ['a value provider (no class, no inject)', wrapper({})],
    [
      "a factory whose class is not what it injects (a factory's inject is its whole list)",
      wrapper({ metatype: ByConstructor, inject: [Service] }),
    ],
    ['a factory injecting a string token', wrapper({ inject: ['IdempotencyContext', { token: 'x' }] })],
  ])('does not see it in %s', (_, other) => {
    expect(injectsIdempotencyContext(other)).toBe(false);
  });
});
