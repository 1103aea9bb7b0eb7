import { ForbiddenException, INestApplicationContext, Injectable, Scope as NestScope } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  DynamoDbIdempotencyRepository,
  Idempotent,
  IdempotencyContext,
  IdempotencyFingerprintFailedError,
  IdempotencyInFlightError,
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyMismatchError,
  IdempotencyModule,
  IdempotencyOutcomeEvent,
  IdempotencyRequestInvalidError,
} from 'nestjs-dynamodb-idempotency';
import { runCli } from '../../libs/idempotency/src/cli/run-cli';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';

interface Order {
  id: string;
  amount: number;
}

/** What the methods did, in order: the effects the tests count. */
const effects: string[] = [];
/** Lets a test hold a run open (to send a duplicate meanwhile), or make it throw. */
const gates: { hold?: Promise<void>; fail?: Error } = {};

@Injectable()
class Payments {
  constructor(private readonly context: IdempotencyContext) {}

  @Idempotent({ name: 'payments.charge', key: (order: Order) => order.id })
  async charge(order: Order): Promise<{ charged: number; run: number }> {
    await gates.hold;
    if (gates.fail) throw gates.fail;
    effects.push(`charge ${order.id}`);
    return { charged: order.amount, run: effects.length };
  }

  /** Two recovery points: a run that fails after the first resumes at the second. */
  @Idempotent({ key: (order: Order) => order.id, fingerprint: (order: Order) => order.amount, name: 'payments.ship' })
  async ship(order: Order, attempt: number): Promise<string> {
    const label = await this.context.step('label', () => {
      effects.push(`label ${order.id}`);
      return `label-${order.id}`;
    });
    if (attempt === 1) throw new Error('the carrier timed out');
    await this.context.step('pickup', () => {
      effects.push(`pickup ${order.id}`);
    });
    return label;
  }

  @Idempotent({ name: 'payments.anything', key: (id: unknown) => id as string })
  async anything(id: unknown, payload?: unknown): Promise<unknown> {
    effects.push(`anything ${String(id)}`);
    return payload;
  }
}

describe.each(ENGINES)('@Idempotent() on a provider method (%s)', (engine) => {
  let endpoint: string;
  let stop: () => Promise<void>;
  const contexts: INestApplicationContext[] = [];
  const outcomes: IdempotencyOutcomeEvent[] = [];

  beforeAll(async () => {
    ({ endpoint, stop } = await startStore(engine));
  });
  afterAll(() => stop());
  beforeEach(() => {
    effects.length = 0;
    outcomes.length = 0;
    gates.hold = undefined;
    gates.fail = undefined;
  });
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });

  /** One application instance on the table; the replay cache off, so every duplicate reaches DynamoDB. */
  async function instance(tableName: string, providers: unknown[] = [Payments]): Promise<INestApplicationContext> {
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          client: localClient(endpoint),
          tableName,
          replayCache: { enabled: false },
          onOutcome: (event) => void outcomes.push(event),
        }),
      ],
      providers: providers as never[],
    }).compile();
    const context = await moduleRef.init();
    contexts.push(context);
    return context;
  }

  async function twoInstances(name: string) {
    const tableName = uniqueTableName(name);
    await createIdempotencyTable(localClient(endpoint), tableName);
    const [a, b] = [await instance(tableName), await instance(tableName)];
    const repository = new DynamoDbIdempotencyRepository({ client: localClient(endpoint), tableName });
    return { a: a.get(Payments), b: b.get(Payments), repository };
  }

  it('runs once per key across two instances: the other instance and a repeat get the stored result', async () => {
    const { a, b } = await twoInstances('pm-once');
    const first = await a.charge({ id: 'o-1', amount: 42 });
    expect(await b.charge({ id: 'o-1', amount: 42 })).toEqual(first);
    expect(await a.charge({ id: 'o-1', amount: 42 })).toEqual(first);
    expect(effects).toEqual(['charge o-1']);
    expect(outcomes.map(({ outcome, transport, operation }) => [outcome, transport, operation])).toEqual([
      ['executed', 'method', 'payments.charge'],
      ['replayed', 'method', 'payments.charge'],
      ['replayed', 'method', 'payments.charge'],
    ]);
  });

  it("the operator's keys:inspect finds a method's record by its operation (--name and the method's name)", async () => {
    const tableName = uniqueTableName('pm-cli');
    await createIdempotencyTable(localClient(endpoint), tableName);
    const payments = (await instance(tableName)).get(Payments);
    await payments.charge({ id: 'o-9', amount: 9 });
    await payments.ship({ id: 'o-9', amount: 9 }, 2);
    const inspect = async (...selector: string[]) => {
      const out: string[] = [];
      const flags = ['--table', tableName, '--endpoint', endpoint, '--region', 'us-east-1', '--json'];
      const code = await runCli(['keys:inspect', ...selector, ...flags], {
        log: (line) => out.push(line),
        error: () => undefined,
      });
      return { code, record: code === 0 ? JSON.parse(out.join('\n')) : undefined };
    };
    expect(await inspect('--name', 'payments.charge', '--key', 'o-9')).toMatchObject({
      code: 0,
      record: { status: 'COMPLETED' },
    });
    expect(await inspect('--name', 'payments.ship', '--key', 'o-9')).toMatchObject({
      code: 0,
      record: { status: 'COMPLETED' },
    });
    expect((await inspect('--name', 'payments.charge', '--key', 'o-404')).code).toBe(1);
  });

  it('a duplicate while the first call runs is told it is in flight, and the method runs once', async () => {
    const { a, b } = await twoInstances('pm-inflight');
    let release!: () => void;
    gates.hold = new Promise((resolve) => (release = resolve));
    const first = a.charge({ id: 'o-2', amount: 5 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    await expect(b.charge({ id: 'o-2', amount: 5 })).rejects.toBeInstanceOf(IdempotencyInFlightError);
    release();
    expect(await first).toEqual({ charged: 5, run: 1 });
    expect(effects).toEqual(['charge o-2']);
  });

  it('the fingerprint is every argument by default, or the method’s function: another one with the key is refused', async () => {
    const { a, b } = await twoInstances('pm-mismatch');
    await a.charge({ id: 'o-3', amount: 1 });
    await expect(b.charge({ id: 'o-3', amount: 2 })).rejects.toBeInstanceOf(IdempotencyMismatchError);
    // Every argument, not the first alone: charge('o1', 100) then charge('o1', 999) is another call.
    await expect(a.anything('o-3b', 100)).resolves.toBe(100);
    await expect(b.anything('o-3b', 999)).rejects.toBeInstanceOf(IdempotencyMismatchError);
    await expect(b.anything('o-3b', 100)).resolves.toBe(100);
    // ship's fingerprint is the amount alone: its second argument (the attempt) is not part of it.
    await expect(a.ship({ id: 'o-3', amount: 1 }, 2)).resolves.toBe('label-o-3');
    await expect(b.ship({ id: 'o-3', amount: 1 }, 5)).resolves.toBe('label-o-3');
    await expect(b.ship({ id: 'o-3', amount: 9 }, 2)).rejects.toBeInstanceOf(IdempotencyMismatchError);
    expect(effects).toEqual(['charge o-3', 'anything o-3b', 'label o-3', 'pickup o-3']);
  });

  it('a key function that throws or finds no key, arguments that are not JSON or are nested too deep, fail the call: nothing is claimed, nothing runs', async () => {
    const { a, repository } = await twoInstances('pm-keys');
    await expect(a.anything(undefined)).rejects.toBeInstanceOf(IdempotencyKeyMissingError);
    await expect(a.anything('')).rejects.toBeInstanceOf(IdempotencyKeyInvalidError);
    await expect(a.anything({ not: 'a key' })).rejects.toBeInstanceOf(IdempotencyKeyInvalidError);
    await expect(a.charge(undefined as never)).rejects.toBeInstanceOf(IdempotencyKeyInvalidError); // order.id throws
    await expect(a.anything('x'.repeat(300))).rejects.toBeInstanceOf(IdempotencyKeyInvalidError);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    await expect(a.ship(circular as never, 2)).rejects.toThrow(); // its fingerprint function reads .amount: undefined
    const payments = a as unknown as { charge(order: unknown): Promise<unknown> };
    // Arguments deeper than a fingerprint takes (or a cycle): refused saying so, not as a failed fingerprint function.
    let deep: Record<string, unknown> = { id: 'o-4' };
    for (let i = 0; i < 70; i++) deep = { id: 'o-4', inner: deep };
    for (const argument of [deep, Object.assign(circular, { id: 'o-4' })]) {
      const invalid = payments.charge(argument);
      await expect(invalid).rejects.toBeInstanceOf(IdempotencyRequestInvalidError);
      await expect(invalid).rejects.toThrow('payments.charge: its arguments are nested deeper than 64 levels');
    }
    const logs = new CapturedLogs();
    logs.start();
    const refused = payments.charge({ id: 'o-4', pay: () => 1 }).finally(() => logs.stop());
    await expect(refused).rejects.toBeInstanceOf(IdempotencyFingerprintFailedError);
    expect(logs.at('error')).toEqual([
      expect.objectContaining({
        msg: expect.stringContaining('give the method a fingerprint function'),
        operation: 'payments.charge',
      }),
    ]);
    expect(effects).toEqual([]);
    expect(await repository.get({ key: recordKey('payments.charge', undefined, 'o-4') })).toBeUndefined();
  });

  it('an error releases the key and a retry runs again; an HttpException storeIf calls final is replayed', async () => {
    const { a, b } = await twoInstances('pm-errors');
    gates.fail = new Error('the bank is down');
    await expect(a.charge({ id: 'o-5', amount: 3 })).rejects.toThrow('the bank is down');
    gates.fail = new ForbiddenException('card blocked');
    await expect(b.charge({ id: 'o-5', amount: 3 })).rejects.toBeInstanceOf(ForbiddenException);
    gates.fail = undefined;
    const replayed = await a.charge({ id: 'o-5', amount: 3 }).catch((error: unknown) => error);
    expect(replayed).toBeInstanceOf(ForbiddenException);
    expect((replayed as ForbiddenException).getResponse()).toMatchObject({ message: 'card blocked' });
    expect(effects).toEqual([]);
  });

  it('steps: a run that failed after its first step is resumed there by the next call, on the other instance', async () => {
    const { a, b } = await twoInstances('pm-steps');
    await expect(a.ship({ id: 'o-6', amount: 7 }, 1)).rejects.toThrow('the carrier timed out');
    await expect(b.ship({ id: 'o-6', amount: 7 }, 2)).resolves.toBe('label-o-6');
    expect(effects).toEqual(['label o-6', 'pickup o-6']);
  });

  it('an instance Nest did not create is refused, not run unprotected', async () => {
    await twoInstances('pm-foreign');
    const foreign = new Payments(new IdempotencyContext());
    // A rejected promise, as every failure of a protected call is: never a throw before the promise.
    await expect(foreign.charge({ id: 'o-7', amount: 1 })).rejects.toThrow(
      /Payments\.charge is @Idempotent\(\), but this instance is not a provider of an application that imports IdempotencyModule/,
    );
    expect(effects).toEqual([]);
  });

  it('startup fails for a provider method without a key function, and for a request-scoped provider', async () => {
    const tableName = uniqueTableName('pm-startup');
    @Injectable()
    class Keyless {
      @Idempotent({ ttlSeconds: 60 })
      async run(): Promise<void> {}
    }
    await expect(instance(tableName, [Keyless])).rejects.toThrow(
      'Keyless.run: a provider method needs key: (...args) => string',
    );
    @Injectable({ scope: NestScope.REQUEST })
    class PerRequest {
      @Idempotent({ name: 'per-request.run', key: (id: string) => id })
      async run(id: string): Promise<string> {
        return id;
      }
    }
    await expect(instance(tableName, [PerRequest])).rejects.toThrow(
      'PerRequest.run: a request-scoped provider (or one that depends on one) has no instance before its request',
    );
  });
});
