import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller, INestApplicationContext, Injectable, mixin, Module, Post, Scope, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  DynamoDbIdempotencyRepository,
  Idempotent,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyReentrantCallError,
  IdempotencyService,
  OneTimeTokens,
} from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { ScriptProcess, startScript } from '../support/script-process';
import { createIdempotencyTable } from '../support/table';
import type { Message } from './identity.script';

/** What the methods did, in order. */
const effects: string[] = [];

/** Two feature modules that each define a `Job` class: the same display name, two operations. */
function jobModule(feature: string, name: string): Type {
  @Injectable()
  class Job {
    @Idempotent({ name, key: (tick: string) => tick })
    async run(tick: string): Promise<string> {
      effects.push(`${feature} ${tick}`);
      return `${feature} done`;
    }
  }
  @Module({ providers: [{ provide: `${feature}-job`, useClass: Job }], exports: [`${feature}-job`] })
  class FeatureModule {}
  return FeatureModule;
}

/** A generic consumer made by `mixin()`: its class name is random; its operation is the name it is given. */
function QueueConsumer(queue: string, name = `consume.${queue}`): Type<{ consume(id: string): Promise<string> }> {
  @Injectable()
  class Consumer {
    @Idempotent({ name, key: (id: string) => id })
    async consume(id: string): Promise<string> {
      effects.push(`${queue} ${id}`);
      return queue;
    }
  }
  return mixin(Consumer);
}

@Injectable()
class Base {
  @Idempotent({ name: 'base.work', key: (id: string) => id })
  async work(id: string): Promise<string> {
    effects.push(`base ${id}`);
    return `base ${id}`;
  }
}

describe.each(ENGINES)('one identity per operation (%s)', (engine) => {
  let endpoint: string;
  let stop: () => Promise<void>;
  const contexts: INestApplicationContext[] = [];

  beforeAll(async () => {
    ({ endpoint, stop } = await startStore(engine));
  });
  afterAll(() => stop());
  beforeEach(() => (effects.length = 0));
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });

  async function app(
    metadata: { imports?: unknown[]; providers?: unknown[]; controllers?: unknown[] },
    options: Partial<IdempotencyModuleOptions> = {},
  ): Promise<INestApplicationContext> {
    const tableName = uniqueTableName('identity');
    await createIdempotencyTable(localClient(endpoint), tableName);
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          client: localClient(endpoint),
          tableName,
          replayCache: { enabled: false },
          ...options,
        }),
        ...((metadata.imports ?? []) as never[]),
      ],
      providers: (metadata.providers ?? []) as never[],
      controllers: (metadata.controllers ?? []) as never[],
    }).compile();
    const context = await moduleRef.init();
    contexts.push(context);
    return context;
  }

  it('a provider method without name fails startup, naming the method and suggesting a name', async () => {
    @Injectable()
    class Reminders {
      @Idempotent({ key: (tick: string) => tick })
      async send(tick: string): Promise<string> {
        return tick;
      }
    }
    await expect(app({ providers: [Reminders] })).rejects.toThrow(
      "Reminders.send: a provider method needs name, the operation its records are kept under, unique in the application (e.g. name: 'reminders.send')",
    );
  });

  it('two Job classes of two feature modules: one name for both fails startup; their own names keep their records apart', async () => {
    await expect(
      app({ imports: [jobModule('billing', 'job.run'), jobModule('reminders', 'job.run')] }),
    ).rejects.toThrow('Job.run, Job.run: two protected operations named "job.run"');
    const context = await app({
      imports: [jobModule('billing', 'billing.run'), jobModule('reminders', 'reminders.run')],
    });
    const [billing, reminders] = ['billing-job', 'reminders-job'].map((token) =>
      context.get<{ run(tick: string): Promise<string> }>(token, { strict: false }),
    );
    expect(await billing.run('t-1')).toBe('billing done');
    expect(await reminders.run('t-1')).toBe('reminders done');
    expect(await reminders.run('t-1')).toBe('reminders done');
    expect(effects).toEqual(['billing t-1', 'reminders t-1']);
  });

  it('classes made by mixin(): each its own name runs its own calls; one name given to both fails startup', async () => {
    const context = await app({
      providers: [
        { provide: 'payments', useClass: QueueConsumer('payments') },
        { provide: 'refunds', useClass: QueueConsumer('refunds') },
      ],
    });
    const [payments, refunds] = ['payments', 'refunds'].map((token) =>
      context.get<{ consume(id: string): Promise<string> }>(token),
    );
    expect([await payments.consume('m-1'), await refunds.consume('m-1'), await payments.consume('m-1')]).toEqual([
      'payments',
      'refunds',
      'payments',
    ]);
    expect(effects).toEqual(['payments m-1', 'refunds m-1']);
    await expect(
      app({
        providers: [
          { provide: 'a', useClass: QueueConsumer('a', 'consume') },
          { provide: 'b', useClass: QueueConsumer('b', 'consume') },
        ],
      }),
    ).rejects.toThrow('two protected operations named "consume"');
  });

  it('an override protected under its super method’s name fails startup; under its own name, its super call runs once', async () => {
    @Injectable()
    class SameName extends Base {
      @Idempotent({ name: 'base.work', key: (id: string) => id })
      override async work(id: string): Promise<string> {
        return `sub ${await super.work(id)}`;
      }
    }
    await expect(app({ providers: [SameName] })).rejects.toThrow(
      'Base.work (overridden by SameName.work), SameName.work: two protected operations named "base.work"; a method and the one it overrides, both protected under one name: the override\'s call of super would wait on its own claim for ever',
    );
    @Injectable()
    class OwnName extends Base {
      @Idempotent({ name: 'own.work', key: (id: string) => id })
      override async work(id: string): Promise<string> {
        return `sub ${await super.work(id)}`;
      }
    }
    // An override without a decorator still reaches its super method: that operation's name counts too.
    @Injectable()
    class Unprotected extends Base {
      override async work(id: string): Promise<string> {
        return `plain ${await super.work(id)}`;
      }
    }
    @Injectable()
    class Other {
      @Idempotent({ name: 'base.work', key: (id: string) => id })
      async run(id: string): Promise<string> {
        return id;
      }
    }
    await expect(app({ providers: [Unprotected, Other] })).rejects.toThrow(
      'Base.work (overridden by Unprotected.work), Other.run: two protected operations named "base.work"',
    );
    const own = (await app({ providers: [OwnName] })).get(OwnName);
    expect(await own.work('w-1')).toBe('sub base w-1');
    expect(await own.work('w-1')).toBe('sub base w-1');
    expect(effects).toEqual(['base w-1']);
  });

  it('one protected method inherited by two providers fails startup: their calls would share its records', async () => {
    @Injectable()
    class Billing extends Base {}
    @Injectable()
    class Refunds extends Base {}
    await expect(app({ providers: [Billing, Refunds] })).rejects.toThrow(
      'Billing.work, Refunds.work: two protected operations named "base.work"',
    );
  });

  it('a route and a provider method of one name fail startup, and names are refused where programmatic calls write', async () => {
    @Controller('orders')
    class Orders {
      @Post()
      @Idempotent()
      create() {
        return {};
      }
    }
    @Injectable()
    class Shadow {
      @Idempotent({ name: 'POST /orders', key: (id: string) => id })
      async run(id: string) {
        return id;
      }
    }
    await expect(app({ controllers: [Orders], providers: [Shadow] })).rejects.toThrow(
      'Orders.create, Shadow.run: two protected operations named "POST /orders"',
    );
    @Injectable()
    class Reserved {
      @Idempotent({ name: 'fn charge', key: (id: string) => id })
      async run(id: string) {
        return id;
      }
    }
    await expect(app({ providers: [Reserved] })).rejects.toThrow(
      "Reserved.run: name may not start with 'fn ': IdempotencyService.execute() and one-time tokens write operations that start so",
    );
  });

  it('an operation, name or purpose longer than the table’s key holds is a TypeError naming it and the limit', async () => {
    @Injectable()
    class Long {
      @Idempotent({ name: 'x'.repeat(2000), key: (id: string) => id })
      async run(id: string) {
        return id;
      }
    }
    await expect(app({ providers: [Long] })).rejects.toThrow(
      'Long.run: name makes an operation of 2000 bytes ("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"…), and a record key holds at most 1983 bytes of it',
    );
    const context = await app({});
    const service = context.get(IdempotencyService);
    await expect(service.execute({ operation: 'y'.repeat(1981), key: 'k' }, () => 1)).rejects.toThrow(
      'IdempotencyService.execute(yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy): operation makes an operation',
    );
    await expect(context.get(OneTimeTokens).consume('t', { purpose: 'p'.repeat(1979) })).rejects.toThrow(
      'OneTimeTokens.consume: purpose makes an operation of 1984 bytes',
    );
    // At the limit it works, on the real store.
    await expect(service.execute({ operation: 'y'.repeat(1980), key: 'k' }, () => 'stored')).resolves.toBe('stored');
    await expect(context.get(OneTimeTokens).consume('t', { purpose: 'p'.repeat(1978) })).resolves.toBe(true);
  });

  it('a method that calls itself with its key is refused as re-entrant at once (with unkeyedCalls off too), not told to retry for ever', async () => {
    @Injectable()
    class Countdown {
      @Idempotent({ name: 'countdown.count', key: () => 'one-key' })
      async count(n: number): Promise<number> {
        effects.push(`count ${n}`);
        return n === 0 ? 0 : 1 + (await this.count(n - 1));
      }
    }
    @Injectable()
    class Relay {
      constructor(private readonly countdown: Countdown) {}
      @Idempotent({ name: 'relay.pass', key: (id: string) => id })
      async pass(_id: string): Promise<number> {
        return this.countdown.count(1);
      }
    }
    for (const unkeyedCalls of ['warn', 'off'] as const) {
      effects.length = 0;
      const context = await app({ providers: [Countdown, Relay] }, { unkeyedCalls });
      const started = Date.now();
      const error = await context
        .get(Countdown)
        .count(3)
        .catch((thrown: unknown) => thrown);
      expect(error).toBeInstanceOf(IdempotencyReentrantCallError);
      expect(String(error)).toContain(
        'countdown.count was called again with the key it holds, from inside its own call',
      );
      expect(Date.now() - started).toBeLessThan(2000);
      expect(effects).toEqual(['count 3']);
      // Through another protected call: Relay.pass → Countdown.count(1) → Countdown.count(0), the same key again.
      await expect(context.get(Relay).pass('r-1')).rejects.toBeInstanceOf(IdempotencyReentrantCallError);
      // The outer calls released their keys (the error is not final): a call without recursion runs.
      await expect(context.get(Countdown).count(0)).resolves.toBe(0);
    }
  });

  it('execute() inside an execute() of the same operation and key is refused as re-entrant', async () => {
    const service = (await app({})).get(IdempotencyService);
    const call = { operation: 'nested', key: 'n-1' };
    const outer = service.execute(call, () => service.execute(call, () => 'inner'));
    await expect(outer).rejects.toThrow(IdempotencyReentrantCallError);
    await expect(outer).rejects.toThrow('fn nested was called again with the key it holds');
    await expect(
      service.execute({ ...call, key: 'n-2' }, () => service.execute({ ...call, key: 'n-3' }, () => 'inner')),
    ).resolves.toBe('inner');
  });

  it('a frozen instance, a transient provider from app.resolve(): their calls run protected', async () => {
    @Injectable()
    class Frozen {
      constructor() {
        Object.freeze(this);
      }
      @Idempotent({ name: 'frozen.run', key: (id: string) => id })
      async run(id: string): Promise<string> {
        effects.push(`frozen ${id}`);
        return id;
      }
    }
    @Injectable({ scope: Scope.TRANSIENT })
    class Transient {
      @Idempotent({ name: 'transient.run', key: (id: string) => id })
      async run(id: string): Promise<string> {
        effects.push(`transient ${id}`);
        return id;
      }
    }
    @Injectable()
    class UsesTransient {
      constructor(readonly transient: Transient) {}
    }
    const context = await app({ providers: [Frozen, Transient, UsesTransient] });
    const frozen = context.get(Frozen);
    expect([await frozen.run('f-1'), await frozen.run('f-1')]).toEqual(['f-1', 'f-1']);
    const resolved = await context.resolve(Transient);
    expect([await resolved.run('t-1'), await context.get(UsesTransient).transient.run('t-1')]).toEqual(['t-1', 't-1']);
    expect(effects).toEqual(['frozen f-1', 'transient t-1']);
  });

  it('@Idempotent() on a static method is a TypeError when the class is defined', () => {
    expect(() => {
      class Statics {
        @Idempotent({ name: 'statics.run', key: (id: string) => id })
        static async run(id: string): Promise<string> {
          return id;
        }
      }
      return Statics;
    }).toThrow('@Idempotent() on the static method Statics.run: a static method belongs to no instance Nest created');
  });

  it('a record written under a name is where keys:inspect and the repository find it', async () => {
    const tableName = uniqueTableName('identity-record');
    await createIdempotencyTable(localClient(endpoint), tableName);
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({ client: localClient(endpoint), tableName, replayCache: { enabled: false } }),
      ],
      providers: [{ provide: 'payments', useClass: QueueConsumer('payments') }],
    }).compile();
    const context = await moduleRef.init();
    contexts.push(context);
    await context.get<{ consume(id: string): Promise<string> }>('payments').consume('m-9');
    const repository = new DynamoDbIdempotencyRepository({ client: localClient(endpoint), tableName });
    expect(await repository.get({ key: recordKey('consume.payments', undefined, 'm-9') })).toMatchObject({
      status: 'COMPLETED',
    });
  });
});

describe('a mixin() consumer in three processes (two, then one restarted)', () => {
  const engine = ENGINES.at(-1)!;
  let endpoint: string;
  let stopStore: () => Promise<void>;
  const processes: ScriptProcess[] = [];
  let nextId = 0;

  beforeAll(async () => {
    ({ endpoint, stop: stopStore } = await startStore(engine));
  });
  afterAll(async () => {
    await Promise.all(processes.splice(0).map((each) => each.kill()));
    await stopStore();
  });

  function deliver(instance: ScriptProcess, message: Message): Promise<{ result?: string; className?: string }> {
    const id = nextId++;
    return new Promise((resolve) => {
      const listen = (answer: { id?: number; result?: string; className?: string }) => {
        if (answer.id !== id) return;
        instance.child.off('message', listen);
        resolve(answer);
      };
      instance.child.on('message', listen);
      instance.child.send({ id, message });
    });
  }

  it('one message handled by A, then B, then A restarted: run once, though the class has a random name in each', async () => {
    const tableName = uniqueTableName('mixin-processes');
    await createIdempotencyTable(localClient(endpoint), tableName);
    const effects = join(mkdtempSync(join(tmpdir(), 'mixin-')), 'effects.log');
    writeFileSync(effects, '');
    const start = async () => {
      const script = join(__dirname, 'identity.script.ts');
      const started = await startScript(script, {
        DYNAMODB_ENDPOINT: endpoint,
        IDEMPOTENCY_TABLE: tableName,
        EFFECTS: effects,
      });
      processes.push(started);
      return started;
    };
    const message = { id: 'pay-1', amount: 5 };
    const a = await start();
    const first = await deliver(a, message);
    const b = await start();
    const second = await deliver(b, message);
    await a.kill();
    const third = await deliver(await start(), message);
    expect(new Set([first.className, second.className, third.className]).size).toBe(3);
    expect([second.result, third.result]).toEqual([first.result, first.result]);
    expect(readFileSync(effects, 'utf8').split('\n').filter(Boolean)).toEqual([`payments pay-1 ${a.child.pid}`]);
  });
});
