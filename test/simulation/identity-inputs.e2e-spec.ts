import { INestApplicationContext, Injectable, mixin, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import fc from 'fast-check';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyReentrantCallError,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { INPUT_RUNS, INPUT_SEED } from './inputs';

/**
 * An operation's identity, generated (issue 63 §1): apps of two or three providers whose `@Idempotent()` methods are
 * plain classes, classes made by `mixin()`, classes that share a display name, subclasses that override a protected
 * method with or without a decorator of their own, subclasses that inherit one, and methods that call themselves with
 * their key; each with a `name` drawn from a small pool, so that names collide. Each app is deployed twice over one
 * store (two instances, their classes made afresh with other display names: a bundler's renaming between deploys).
 * Checked on every run, against the rule written apart from the library's code: startup refuses exactly the apps in
 * which two protected methods of two providers (or a method and the one it overrides) share a name; otherwise every
 * operation runs once across both deploys, each call gets its own operation's answer, and a re-entrant call is refused
 * at once.
 */
const runs = INPUT_RUNS;
const seed = INPUT_SEED;

type Shape = 'plain' | 'mixin' | 'display-name' | 'override-own' | 'override-plain' | 'inherited' | 'reentrant';

interface Provider {
  shape: Shape;
  name: string;
  /** The overridden (or inherited) method's name, for the subclass shapes. */
  baseName: string;
}

/** Every run of a method's body, by `<operation> <key>`. */
const bodies = new Map<string, number>();
const ran = (operation: string, key: string) => {
  const id = `${operation} ${key}`;
  bodies.set(id, (bodies.get(id) ?? 0) + 1);
  return id;
};

interface Runner {
  run(key: string, depth?: number): Promise<string>;
}

/** The classes of one deploy: made afresh each time (other display names), one base shared by the inheriting ones. */
function deploy(providers: Provider[], deployment: number): Type<Runner>[] {
  const sharedBases = new Map<string, Type<Runner>>();
  const base = (name: string): Type<Runner> => {
    class Base {
      @Idempotent({ name, key: (key: string) => key })
      async run(key: string): Promise<string> {
        return ran(name, key);
      }
    }
    return Base;
  };
  return providers.map(({ shape, name, baseName }, i) => {
    let made: Type<Runner>;
    if (shape === 'override-own') {
      class Own extends base(baseName) {
        @Idempotent({ name, key: (key: string) => key })
        override async run(key: string): Promise<string> {
          return `${ran(name, key)} > ${await super.run(key)}`;
        }
      }
      made = Own;
    } else if (shape === 'override-plain') {
      class Plain extends base(baseName) {
        override async run(key: string): Promise<string> {
          return `plain > ${await super.run(key)}`;
        }
      }
      made = Plain;
    } else if (shape === 'inherited') {
      if (!sharedBases.has(baseName)) sharedBases.set(baseName, base(baseName));
      made = class Inherits extends sharedBases.get(baseName)! {};
    } else if (shape === 'reentrant') {
      class Reentrant {
        @Idempotent({ name, key: (key: string) => key })
        async run(key: string, depth = 0): Promise<string> {
          ran(name, key);
          return depth === 0 ? this.run(key, 1) : 'inner';
        }
      }
      made = Reentrant;
    } else {
      class Own {
        @Idempotent({ name, key: (key: string) => key })
        async run(key: string): Promise<string> {
          return ran(name, key);
        }
      }
      made = shape === 'mixin' ? mixin(Own) : Own;
    }
    // A display name of this deploy's own (a bundler renames classes), or one shared by every provider of the app.
    const display =
      shape === 'display-name' ? 'Job' : `${shape}_${i}_${deployment}_${Math.random().toString(36).slice(2, 6)}`;
    if (shape !== 'mixin') Object.defineProperty(made, 'name', { value: display });
    Injectable()(made);
    return made;
  });
}

/** The protected methods each provider reaches, as (provider, operation, which method): the rule's input. */
function reached(providers: Provider[]): { provider: number; operation: string; method: string }[] {
  return providers.flatMap(({ shape, name, baseName }, provider) => {
    const base = {
      provider,
      operation: baseName,
      method: shape === 'inherited' ? `shared ${baseName}` : `base ${provider}`,
    };
    if (shape === 'override-own') return [{ provider, operation: name, method: `own ${provider}` }, base];
    if (shape === 'override-plain' || shape === 'inherited') return [base];
    return [{ provider, operation: name, method: `own ${provider}` }];
  });
}

/** The documented rule: one name, one method of one provider (a provider's instances are one operation). */
function refused(providers: Provider[]): boolean {
  const byName = new Map<string, Set<string>>();
  for (const { provider, operation, method } of reached(providers)) {
    const owners = byName.get(operation) ?? new Set<string>();
    owners.add(`${provider}:${method}`);
    byName.set(operation, owners);
  }
  return [...byName.values()].some((owners) => owners.size > 1);
}

describe('generated operation identities (in memory, two deploys)', () => {
  const contexts: INestApplicationContext[] = [];
  let run = 0;
  afterAll(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });

  it(`refuses exactly the apps whose operations share a name; otherwise every operation runs once across deploys, with its own answer (${runs} runs)`, async () => {
    const provider = fc.record({
      shape: fc.constantFrom<Shape>(
        'plain',
        'mixin',
        'display-name',
        'override-own',
        'override-plain',
        'inherited',
        'reentrant',
      ),
      name: fc.constantFrom('a', 'b', 'c', 'd'),
      baseName: fc.constantFrom('a', 'b', 'base'),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(provider, { minLength: 1, maxLength: 3 }), async (providers) => {
        const repository = new InMemoryIdempotencyRepository();
        const start = async (deployment: number) => {
          const classes = deploy(providers, deployment);
          const moduleRef = await Test.createTestingModule({
            imports: [IdempotencyModule.forRoot({ repository, replayCache: { enabled: false } })],
            providers: classes.map((useClass, i) => ({ provide: `provider-${i}`, useClass })),
          }).compile();
          const context = await moduleRef.init();
          contexts.push(context);
          return classes.map((_, i) => context.get<Runner>(`provider-${i}`));
        };
        if (refused(providers)) {
          await expect(start(1)).rejects.toThrow('two protected operations named');
          return;
        }
        const instances = [await start(1), await start(2)];
        const key = `k-${++run}`;
        const answers: { provider: number; answer?: string; error?: unknown }[] = [];
        for (const deployed of instances) {
          for (const [i, runner] of deployed.entries()) {
            await runner.run(key).then(
              (answer) => answers.push({ provider: i, answer }),
              (error: unknown) => answers.push({ provider: i, error }),
            );
          }
        }
        for (const { provider: i, answer, error } of answers) {
          const { shape, name, baseName } = providers[i];
          if (shape === 'reentrant') {
            expect(error).toBeInstanceOf(IdempotencyReentrantCallError);
            continue;
          }
          // Its own operation's answer, the same in both deploys (the second replays the first).
          const own = `${name} ${key}`;
          const baseAnswer = `${baseName} ${key}`;
          const expected =
            shape === 'override-own'
              ? `${own} > ${baseAnswer}`
              : shape === 'override-plain'
                ? `plain > ${baseAnswer}`
                : shape === 'inherited'
                  ? baseAnswer
                  : own;
          expect({ provider: i, answer, error }).toEqual({ provider: i, answer: expected, error: undefined });
        }
        // Every operation's body ran once across both deploys; a re-entrant one's outer body once per call.
        for (const { operation } of reached(providers)) {
          const reentrant = providers.some(({ shape, name }) => shape === 'reentrant' && name === operation);
          expect({ operation, runs: bodies.get(`${operation} ${key}`) }).toEqual({
            operation,
            runs: reentrant ? 2 : 1,
          });
        }
      }),
      { numRuns: runs, seed },
    );
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  }, 300_000);
});
