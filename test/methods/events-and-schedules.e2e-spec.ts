import { INestApplicationContext, Injectable } from '@nestjs/common';
import { EventEmitter2, EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { Cron, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { Idempotent, IdempotencyModule, tickKey } from 'nestjs-dynamodb-idempotency';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';

interface OrderPaid {
  orderId: string;
  amount: number;
}

const effects: string[] = [];
/** Holds `ship` open while a test delivers a duplicate. */
let shipping: Promise<void> | undefined;

/** Listeners with `@Idempotent()` below `@OnEvent` and above it, synchronous and `async: true`. */
@Injectable()
class Shipping {
  @OnEvent('order.paid')
  @Idempotent({ name: 'shipping.ship', key: (event: OrderPaid) => event.orderId })
  async ship(event: OrderPaid): Promise<string> {
    await shipping;
    effects.push(`ship ${event.orderId}`);
    return `parcel-${event.orderId}`;
  }

  @Idempotent({ name: 'shipping.invoice', key: (event: OrderPaid) => event.orderId, waitMs: 5000 })
  @OnEvent('order.paid', { async: true })
  async invoice(event: OrderPaid): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 50));
    effects.push(`invoice ${event.orderId}`);
  }
}

/** A job every second on every instance: one run per tick across them (the others wait for its result). */
@Injectable()
class Reports {
  @Cron('* * * * * *')
  @Idempotent({ name: 'reports.every-second', key: () => tickKey(1), waitMs: 3000 })
  async everySecond(): Promise<void> {
    effects.push(`report ${tickKey(1)}`);
  }
}

async function until(done: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!done() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe.each(ENGINES)('@Idempotent() under @OnEvent and @Cron, two instances (%s)', (engine) => {
  let endpoint: string;
  let stop: () => Promise<void>;
  const contexts: INestApplicationContext[] = [];

  beforeAll(async () => {
    ({ endpoint, stop } = await startStore(engine));
  });
  afterAll(() => stop());
  beforeEach(() => {
    effects.length = 0;
  });
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });

  async function instance(tableName: string, imports: unknown[], providers: unknown[]) {
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({ client: localClient(endpoint), tableName, replayCache: { enabled: false } }),
        ...(imports as never[]),
      ],
      providers: providers as never[],
    }).compile();
    const context = await moduleRef.init();
    contexts.push(context);
    return context;
  }

  it('an event delivered to both instances, and again to one, is handled once by each listener, whatever the decorator order', async () => {
    const tableName = uniqueTableName('ev-once');
    await createIdempotencyTable(localClient(endpoint), tableName);
    const [a, b] = [
      await instance(tableName, [EventEmitterModule.forRoot()], [Shipping]),
      await instance(tableName, [EventEmitterModule.forRoot()], [Shipping]),
    ];
    const event: OrderPaid = { orderId: 'o-1', amount: 10 };
    const first = await a.get(EventEmitter2).emitAsync('order.paid', event);
    expect(first).toContain('parcel-o-1');
    expect(await b.get(EventEmitter2).emitAsync('order.paid', event)).toContain('parcel-o-1');
    a.get(EventEmitter2).emit('order.paid', event);
    await until(() => effects.length >= 2);
    await new Promise((resolve) => setTimeout(resolve, 300)); // the duplicates' async listeners, settled
    expect(effects.sort()).toEqual(['invoice o-1', 'ship o-1']);
  });

  it('a duplicate delivered while the first runs: a listener with waitMs gets its result, one without is refused (the emitter logs it); each ran once', async () => {
    const tableName = uniqueTableName('ev-race');
    await createIdempotencyTable(localClient(endpoint), tableName);
    const [a, b] = [
      await instance(tableName, [EventEmitterModule.forRoot()], [Shipping]),
      await instance(tableName, [EventEmitterModule.forRoot()], [Shipping]),
    ];
    const event: OrderPaid = { orderId: 'o-2', amount: 20 };
    let release!: () => void;
    shipping = new Promise((resolve) => (release = resolve));
    const logs = new CapturedLogs();
    logs.start();
    try {
      const first = a.get(EventEmitter2).emitAsync('order.paid', event);
      await until(() => effects.includes('invoice o-2'));
      await b.get(EventEmitter2).emitAsync('order.paid', event);
      release();
      await first;
      await new Promise((resolve) => setTimeout(resolve, 300)); // b's async invoice listener, settled
    } finally {
      shipping = undefined;
      logs.stop();
    }
    expect(effects.sort()).toEqual(['invoice o-2', 'ship o-2']);
    expect(logs.at('error').map(String)).toEqual([
      expect.stringContaining('A call with this idempotency key is still running'),
    ]);
  });

  it('a @Cron job on two instances runs once per tick', async () => {
    const tableName = uniqueTableName('cron');
    await createIdempotencyTable(localClient(endpoint), tableName);
    await instance(tableName, [ScheduleModule.forRoot()], [Reports]);
    await instance(tableName, [ScheduleModule.forRoot()], [Reports]);
    await new Promise((resolve) => setTimeout(resolve, 3500));
    // No tick after this one; the last tick's calls (a winner, a waiting loser) settle before the store goes away.
    for (const context of contexts) for (const job of context.get(SchedulerRegistry).getCronJobs().values()) job.stop();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const ticks = effects.filter((effect) => effect.startsWith('report '));
    expect(ticks.length).toBeGreaterThanOrEqual(2);
    expect(new Set(ticks).size).toBe(ticks.length);
  });
});
