import { Controller, Get, Post, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyService,
  IdempotentOutcome,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';

/** Starts an app of `controllers` on an in-memory store; its startup error, if any. */
async function startupError(controllers: Type[], options: IdempotencyModuleOptions = {}): Promise<string> {
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository(), ...options })],
    controllers,
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  try {
    await app.init();
    return '';
  } catch (error) {
    return (error as Error).message;
  } finally {
    await app.close().catch(() => undefined);
  }
}

const scoped = { scope: () => 'tenant' };

@Controller('a')
class UnscopedDoor {
  @Post()
  @Idempotent()
  create() {}

  @Get('outcome')
  @IdempotentOutcome('POST /a')
  outcome() {}
}

@Controller('b')
class PublicDoor {
  @Post()
  @Idempotent({ name: 'orders.create' })
  create() {}

  @Get('outcome')
  @IdempotentOutcome('orders.create', { private: false })
  outcome() {}
}

@Controller('c')
class UnknownDoor {
  @Post()
  @Idempotent(scoped)
  create() {}

  @Get('outcome')
  @IdempotentOutcome('POST /elsewhere')
  outcome() {}
}

@Controller('d')
class PostDoor {
  @Post()
  @Idempotent(scoped)
  create() {}

  @Post('outcome')
  @IdempotentOutcome('POST /d')
  outcome() {}
}

describe('@IdempotentOutcome() at startup', () => {
  it('refuses a door to an operation without a scope: any caller who sends a key would read its outcome', async () => {
    expect(await startupError([UnscopedDoor])).toContain(
      'UnscopedDoor.outcome: @IdempotentOutcome("POST /a"): the operation has no scope',
    );
  });

  it('accepts it with the module’s scope, or when the door says the outcomes are not private', async () => {
    expect(await startupError([UnscopedDoor], { scope: () => 'tenant' })).toBe('');
    expect(await startupError([PublicDoor])).toBe('');
  });

  it('refuses an operation that is not a protected HTTP route of the app, naming those it has, and a door that is not a GET', async () => {
    expect(await startupError([UnknownDoor])).toContain(
      'UnknownDoor.outcome: @IdempotentOutcome("POST /elsewhere"): no protected HTTP route is named so (the route as \'POST /orders\', or its name); the application has "POST /c"',
    );
    expect(await startupError([PostDoor])).toContain(
      'PostDoor.outcome: @IdempotentOutcome("POST /d") answers GET requests',
    );
  });

  it('checks its options where they are given', () => {
    expect(() => IdempotentOutcome('')).toThrow(TypeError);
    expect(() => IdempotentOutcome('POST /a', { maxWaitSeconds: Number.NaN })).toThrow(
      '@IdempotentOutcome(POST /a): maxWaitSeconds must be a whole number of seconds from 0 to 60, got NaN',
    );
    expect(() => IdempotentOutcome('POST /a', { maxWaitSeconds: 61 })).toThrow(TypeError);
    expect(() => IdempotentOutcome('POST /a', { private: 'no' as never })).toThrow(TypeError);
  });
});

/** `IdempotencyService.outcome()` on dynalite: what `execute()` stored, by its operation, key and scope alone. */
describe('IdempotencyService.outcome (dynalite)', () => {
  let dynamo: Dynalite;
  let service: IdempotencyService;
  let close: () => Promise<void>;
  beforeAll(async () => {
    dynamo = await startDynalite();
    const client = localClient(dynamo.endpoint);
    const tableName = uniqueTableName('outcome');
    await createIdempotencyTable(client, tableName);
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false }, pendingTtlSeconds: 2 }),
      ],
    }).compile();
    const app = await moduleRef.init();
    service = app.get(IdempotencyService);
    close = () => app.close();
  });
  afterAll(async () => {
    await close();
    await dynamo.stop();
  });

  it('completed, with the value a replay returns; unknown for another key or scope', async () => {
    const key = `done-${Date.now()}`;
    const at = new Date('2026-12-07T10:00:00Z');
    await service.execute({ operation: 'charge', key, scope: 7 }, () => ({ charged: 100, at }));
    const done = await service.outcome({ operation: 'charge', key, scope: 7 });
    expect(done).toMatchObject({ state: 'completed', value: { charged: 100, at } });
    expect((done as { value: { at: unknown } }).value.at).toBeInstanceOf(Date);
    expect(await service.outcome({ operation: 'charge', key, scope: 8 })).toEqual({ state: 'unknown' });
    expect(await service.outcome({ operation: 'refund', key, scope: 7 })).toEqual({ state: 'unknown' });
  });

  it('in flight while it runs, when to ask again; with waitMs, the result as soon as it completes', async () => {
    const key = `running-${Date.now()}`;
    let finish!: () => void;
    const running = service.execute(
      { operation: 'charge', key },
      () => new Promise<string>((done) => (finish = () => done('ok'))),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await service.outcome({ operation: 'charge', key })).toEqual({ state: 'in-flight', retryAfterSeconds: 1 });
    const waited = service.outcome({ operation: 'charge', key }, { waitMs: 5000 });
    setTimeout(() => finish(), 300);
    expect(await waited).toMatchObject({ state: 'completed', value: 'ok' });
    await running;
  });

  it('released after a failure that may be retried; a bad waitMs is a TypeError', async () => {
    const key = `failed-${Date.now()}`;
    await expect(
      service.execute({ operation: 'charge', key }, () => Promise.reject(new Error('the provider is down'))),
    ).rejects.toThrow('the provider is down');
    expect(await service.outcome({ operation: 'charge', key })).toEqual({ state: 'released' });
    await expect(service.outcome({ operation: 'charge', key }, { waitMs: Number.NaN })).rejects.toThrow(TypeError);
    await expect(service.outcome({ operation: 'charge', key }, { waitMs: 60_001 })).rejects.toThrow(TypeError);
  });
});
