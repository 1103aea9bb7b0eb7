import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  IdempotencyClock,
  IdempotencyInFlightError,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyRepository,
  IdempotencyService,
  InMemoryIdempotencyRepository,
  SystemClock,
} from 'nestjs-dynamodb-idempotency';
import { fingerprintValue } from '../../libs/idempotency/src/keys/fingerprint';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { testClock } from '../support/clock';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable, scanTable } from '../support/table';
import { metricValue, registerTestTelemetry } from '../support/telemetry';

/**
 * The lease as the owner's processes see it: renewed while the work runs, given up at `maxLeaseSeconds` and on
 * shutdown, refused once another caller took over. Two module instances on one dynalite table stand for two
 * processes (each has its own replay cache and single-flight, so the second one's calls reach DynamoDB).
 */
const telemetry = registerTestTelemetry();
let dynamo: Dynalite;
let client: DynamoDBClient;
const contexts: INestApplicationContext[] = [];
beforeAll(async () => {
  dynamo = await startDynalite();
  client = localClient(dynamo.endpoint);
});
afterEach(async () => {
  await Promise.all(contexts.splice(0).map((context) => context.close()));
});
afterAll(() => dynamo.stop());

/** One "process": the module on `tableName` through `endpoint`, with its own clock. */
async function instance(
  tableName: string,
  options: IdempotencyModuleOptions = {},
  { endpoint = dynamo.endpoint, clock = new SystemClock() as IdempotencyClock } = {},
): Promise<IdempotencyService> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      IdempotencyModule.forRoot({
        client: localClient(endpoint),
        tableName,
        replayCache: { enabled: false },
        ...options,
      }),
    ],
  })
    .overrideProvider(IdempotencyClock)
    .useValue(clock)
    .compile();
  const context = await moduleRef.init();
  contexts.push(context);
  return context.get(IdempotencyService);
}

async function newTable(): Promise<string> {
  const tableName = uniqueTableName('lease');
  await createIdempotencyTable(client, tableName);
  return tableName;
}

/** A function that runs until `finish()` is called; `calls` counts its runs. */
function parked<T>(result: T) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const fn = jest.fn(async () => {
    await done;
    return result;
  });
  return { fn, finish };
}

/** Tries `execute` every 200 ms until it runs or `deadlineMs` passes; returns when it ran (ms since start) or undefined. */
async function claimWithin(service: IdempotencyService, key: string, deadlineMs: number): Promise<number | undefined> {
  const started = performance.now();
  while (performance.now() - started < deadlineMs) {
    try {
      await service.execute({ operation: 'lease', key }, async () => 'successor');
      return performance.now() - started;
    } catch (error) {
      if (!(error instanceof IdempotencyInFlightError)) throw error;
    }
    await sleep(200);
  }
  return undefined;
}

describe('lease renewal', () => {
  it('keeps a 1 s lease alive for a 3.5 s function: another process gets 409 throughout, then the result', async () => {
    const tableName = await newTable();
    const owner = await instance(tableName, { pendingTtlSeconds: 1 });
    const other = await instance(tableName);
    const work = parked('first');
    const first = owner.execute({ operation: 'lease', key: 'slow' }, work.fn);
    const takenOver = await claimWithin(other, 'slow', 3500);
    work.finish();
    expect(await first).toBe('first');
    expect(takenOver).toBeUndefined();
    expect(await other.execute({ operation: 'lease', key: 'slow' }, async () => 'never')).toBe('first');
    expect(work.fn).toHaveBeenCalledTimes(1);
  });

  it('stops renewing after maxLeaseSeconds, so a hung function cannot block its key forever', async () => {
    const tableName = await newTable();
    const owner = await instance(tableName, { pendingTtlSeconds: 1, maxLeaseSeconds: 2 });
    const other = await instance(tableName);
    const hung = parked('hung');
    void owner.execute({ operation: 'lease', key: 'hung' }, hung.fn).catch(() => undefined);
    const takenOverAfter = await claimWithin(other, 'hung', 9000);
    hung.finish();
    // Renewed up to 2 s, then the 1 s lease runs out (whole seconds: up to 2 s more), then the other process's
    // clock-skew margin (2 s, for its own 60 s lease).
    expect(takenOverAfter).toBeDefined();
    expect(takenOverAfter!).toBeGreaterThan(2000);
  });

  it('stops renewing on application shutdown, so a stopping process is taken over like a crashed one', async () => {
    const tableName = await newTable();
    const owner = await instance(tableName, { pendingTtlSeconds: 1 });
    const other = await instance(tableName);
    const work = parked('interrupted');
    void owner.execute({ operation: 'lease', key: 'stopping' }, work.fn).catch(() => undefined);
    await sleep(100);
    await contexts[0].close();
    const takenOverAfter = await claimWithin(other, 'stopping', 5000);
    work.finish();
    expect(takenOverAfter).toBeDefined();
  });

  it('counts a refused renewal once and lets the paused owner finish; its completion is refused (lease_lost)', async () => {
    const tableName = await newTable();
    const proxy: FaultProxy = await startFaultProxy(dynamo.endpoint);
    const logs = new CapturedLogs();
    try {
      const before = await telemetry.scrape();
      const refusedBefore = metricValue(before, 'dedup_lease_renewal_refused_total');
      const lostBefore = metricValue(before, 'idempotency_requests_total', { outcome: 'lease_lost' });
      const owner = await instance(tableName, { pendingTtlSeconds: 1 }, { endpoint: proxy.endpoint });
      const other = await instance(tableName);
      const work = parked('orphan');
      const first = owner.execute({ operation: 'lease', key: 'partitioned' }, work.fn);
      await sleep(100);
      logs.start();
      proxy.mode = 'drop'; // the owner is cut off from DynamoDB: its renewals fail, its lease runs out
      expect(await claimWithin(other, 'partitioned', 5000)).toBeDefined();
      proxy.mode = 'pass';
      for (
        let i = 0;
        i < 40 && metricValue(await telemetry.scrape(), 'dedup_lease_renewal_refused_total') === refusedBefore;
        i++
      ) {
        await sleep(100);
      }
      work.finish();
      expect(await first).toBe('orphan'); // its caller still gets its own result
      const after = await telemetry.scrape();
      expect(metricValue(after, 'dedup_lease_renewal_refused_total')).toBe(refusedBefore + 1);
      expect(metricValue(after, 'idempotency_requests_total', { outcome: 'lease_lost' })).toBe(lostBefore + 1);
      expect(await other.execute({ operation: 'lease', key: 'partitioned' }, async () => 'never')).toBe('successor');
      // Each renewal cut off was logged as a store fault, naming the operation and the error code.
      expect(logs.at('error')).toContainEqual(
        expect.objectContaining({ msg: 'idempotency store call failed', operation: 'renew', table: tableName }),
      );
    } finally {
      logs.stop();
      await proxy.stop();
    }
  });

  it('costs no renewal for a function shorter than a third of the lease', async () => {
    const tableName = await newTable();
    const proxy = await startFaultProxy(dynamo.endpoint);
    try {
      const owner = await instance(tableName, { pendingTtlSeconds: 3 }, { endpoint: proxy.endpoint });
      proxy.operations.length = 0; // not the startup probe for transactions
      await owner.execute({ operation: 'lease', key: 'quick' }, async () => sleep(500).then(() => 'quick'));
      expect(proxy.operations).toEqual(['UpdateItem', 'UpdateItem']);
    } finally {
      await proxy.stop();
    }
  });
});

describe('Retry-After and the claim condition agree', () => {
  it('tells a duplicate retryAfterSeconds, never past the moment the lease can be taken over, and that moment works', async () => {
    const tableName = await newTable();
    const clock = testClock();
    const service = await instance(tableName, { retryAfterSeconds: 10 }, { clock });
    // A crashed owner: its claim (5 s lease) is in the table and nobody renews it.
    const key = 'crashed-owner';
    await contexts[0]
      .get(IdempotencyRepository)
      .claim({ key: recordKey('fn lease', undefined, key), fingerprint: fingerprintValue(undefined), leaseSeconds: 5 });

    clock.advanceSeconds(3);
    const refused = service.execute({ operation: 'lease', key }, async () => 'retried');
    // The lease ends at +5; with this caller's clock-skew margin (2 s, for its 60 s lease) it is claimable at +8.
    await expect(refused).rejects.toMatchObject({ retryAfterSeconds: 5 });
    clock.advanceSeconds(5); // exactly Retry-After later
    expect(await service.execute({ operation: 'lease', key }, async () => 'retried')).toBe('retried');
  });

  it('uses the default of 1 s while the lease has longer to run', async () => {
    const tableName = await newTable();
    const owner = await instance(tableName, { pendingTtlSeconds: 30 });
    const other = await instance(tableName);
    const work = parked('done');
    const first = owner.execute({ operation: 'lease', key: 'busy' }, work.fn);
    await sleep(50);
    await expect(other.execute({ operation: 'lease', key: 'busy' }, async () => 'never')).rejects.toMatchObject({
      retryAfterSeconds: 1,
    });
    work.finish();
    await first;
  });
});

describe('the replay cache never outlives the record', () => {
  it('expires a cached result at the expires_at that was written, not at a time taken after the write returned', async () => {
    const clock = testClock();
    const inner = new InMemoryIdempotencyRepository(clock);
    // A completion that takes 5 s to come back: the clock moves on while it is in flight.
    const slowToAnswer = Object.assign(Object.create(inner) as InMemoryIdempotencyRepository, {
      complete: async (input: Parameters<IdempotencyRepository['complete']>[0]) => {
        const result = await inner.complete(input);
        clock.advanceSeconds(5);
        return result;
      },
    });
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ repository: slowToAnswer, ttlSeconds: 10 })],
    })
      .overrideProvider(IdempotencyClock)
      .useValue(clock)
      .compile();
    const service = moduleRef.get(IdempotencyService);
    let runs = 0;
    const fn = async () => ++runs;
    expect(await service.execute({ operation: 'cache', key: 'k' }, fn)).toBe(1); // written to expire at t+10; now t+5
    expect(await service.execute({ operation: 'cache', key: 'k' }, fn)).toBe(1); // cached, t+5
    clock.advanceSeconds(6); // t+11: the record has expired
    expect(await service.execute({ operation: 'cache', key: 'k' }, fn)).toBe(2);
  });
});

describe('operations', () => {
  it('keeps two functions given the same key apart', async () => {
    const tableName = await newTable();
    const service = await instance(tableName);
    expect(await service.execute({ operation: 'charge-card', key: 'msg-1' }, async () => 'charged')).toBe('charged');
    expect(await service.execute({ operation: 'send-receipt', key: 'msg-1' }, async () => 'sent')).toBe('sent');
    expect(await service.execute({ operation: 'charge-card', key: 'msg-1' }, async () => 'again')).toBe('charged');
    const keys = (await scanTable(client, tableName)).map(({ item }) => item.pk.split('#')[0]).sort();
    expect(keys).toEqual(['fn charge-card', 'fn send-receipt']);
  });

  it('refuses a call without an operation name, or with an empty one, and runs nothing', async () => {
    const service = await instance(await newTable());
    const work = jest.fn(async () => 1);
    for (const options of [{ key: 'k' }, { key: 'k', operation: '' }]) {
      await expect(service.execute(options as never, work)).rejects.toThrow(
        /^IdempotencyService\.execute needs an operation name/,
      );
    }
    expect(work).not.toHaveBeenCalled();
  });
});
