import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { Test } from '@nestjs/testing';
import {
  ClaimInput,
  DynamoDbIdempotencyRepository,
  FailInput,
  IdempotencyClock,
  IdempotencyModule,
  IdempotencyReconciler,
  IdempotencyRecord,
  IdempotencyRepository,
  InMemoryIdempotencyRepository,
  ScanInput,
} from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { testClock } from '../support/clock';
import { LAYOUTS } from '../support/layouts';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';
import { metricValue, registerTestTelemetry } from '../support/telemetry';

const telemetry = registerTestTelemetry();

/** A record key as the module writes them (sweeps touch only those). */
const k = (name: string) => recordKey('POST /reconciled', undefined, name);

async function reconcilerOn(repository: IdempotencyRepository, clock: ManualClock, tableName = 'idempotency_keys') {
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ repository, tableName })],
  })
    .overrideProvider(IdempotencyClock)
    .useValue(clock)
    .compile();
  return moduleRef.get(IdempotencyReconciler);
}

/** One completed, one stuck (lease passed), one live, one completed past its retention. */
async function seed(repository: IdempotencyRepository, clock: ManualClock) {
  const claim = async (key: string, leaseSeconds: number) => {
    const result = await repository.claim({ key, fingerprint: 'fp', leaseSeconds });
    if (!result.claimed) throw new Error(`claim of ${key} lost`);
    return result.claimToken;
  };
  const response = { statusCode: 200, headers: {} };
  await repository.complete({ key: k('expired'), claimToken: await claim(k('expired'), 60), response, ttlSeconds: 10 });
  await claim(k('stuck'), 30);
  clock.advanceSeconds(33); // past the lease and the module's clock-skew margin (2 s)
  await claim(k('live'), 60);
  await repository.complete({ key: k('done'), claimToken: await claim(k('done'), 60), response, ttlSeconds: 3600 });
}

describe.each(['in-memory', 'dynalite'])('IdempotencyReconciler on %s', (kind) => {
  let dynamo: Dynalite | undefined;
  let clock: ManualClock;
  let repository: IdempotencyRepository;
  let tableName: string;

  beforeAll(async () => {
    if (kind === 'dynalite') dynamo = await startDynalite();
  });
  afterAll(() => dynamo?.stop());
  beforeEach(async () => {
    clock = testClock();
    tableName = uniqueTableName();
    if (dynamo) {
      const client = localClient(dynamo.endpoint);
      await createIdempotencyTable(client, tableName);
      repository = new DynamoDbIdempotencyRepository({ client, tableName, clock });
    } else {
      repository = new InMemoryIdempotencyRepository(clock);
    }
  });

  it('marks stuck PENDING items FAILED, counts TTL-stale items, and reports both gauges', async () => {
    await seed(repository, clock);
    const reconciler = await reconcilerOn(repository, clock, tableName);
    const result = await reconciler.sweep({ maxPagesPerSecond: 1000, ttlCount: 'full' });
    // The in-memory store evicts a finished record past its expiry on a later write, as DynamoDB's TTL would: the
    // expired completion is gone by the time of the sweep there, and only the stuck lease is TTL-stale. The in-memory
    // store has no index: one scan serves both. The DynamoDB table has the index of keys in flight: the TTL canary
    // counts its 4 items, and the stuck lease comes from the index (one more item read).
    const evicted = kind === 'in-memory' ? 1 : 0;
    const indexed = kind === 'dynalite';
    expect(result).toEqual({
      scanned: 4 - evicted + (indexed ? 1 : 0),
      stuckPending: 1,
      released: 1,
      unreleased: 0,
      ttlStale: 2 - evicted,
      ttlSampled: 4 - evicted,
      ttlEstimated: false,
      indexed,
      deleted: 0,
    });
    expect(await repository.get({ key: k('stuck') })).toMatchObject({ status: 'FAILED' });
    expect(await repository.get({ key: k('live') })).toMatchObject({ status: 'PENDING' });
    expect((await repository.claim({ key: k('stuck'), fingerprint: 'fp', leaseSeconds: 60 })).claimed).toBe(true);

    const text = await telemetry.scrape();
    expect(metricValue(text, 'dedup_stuck_pending_total', { table: tableName })).toBe(1);
    expect(metricValue(text, 'dynamo_ttl_stale_items_total', { table: tableName })).toBe(2 - evicted);

    const again = await reconciler.sweep({ maxPagesPerSecond: 1000 });
    expect(again.stuckPending).toBe(0);
    expect(metricValue(await telemetry.scrape(), 'dedup_stuck_pending_total', { table: tableName })).toBe(0);
  });

  it('reads every page', async () => {
    for (let i = 0; i < 25; i++) await repository.claim({ key: k(`k${i}`), fingerprint: 'fp', leaseSeconds: 1 });
    clock.advanceSeconds(4); // past the 1 s leases and the 2 s clock-skew margin
    const reconciler = await reconcilerOn(repository, clock, tableName);
    const indexed = kind === 'dynalite';
    expect(await reconciler.sweep({ pageSize: 10, maxPagesPerSecond: 1000, ttlCount: 'full' })).toEqual({
      scanned: indexed ? 50 : 25,
      stuckPending: 25,
      released: 25,
      unreleased: 0,
      ttlStale: 25,
      ttlSampled: 25,
      ttlEstimated: false,
      indexed,
      deleted: 0,
    });
  });

  it('never overrides a worker that claimed the key after the scan saw it stuck', async () => {
    await repository.claim({ key: k('taken-over'), fingerprint: 'fp', leaseSeconds: 30 });
    clock.advanceSeconds(33);
    let successor: IdempotencyRecord | undefined;
    // A claim lands between the scan reading the page and the reconciler acting on it.
    const racing = new (class extends IdempotencyRepository {
      claim = (input: ClaimInput) => repository.claim(input);
      complete = repository.complete.bind(repository);
      get = repository.get.bind(repository);
      fail = (input: FailInput) => repository.fail(input);
      renew = repository.renew.bind(repository);
      async *scan(input: ScanInput) {
        for await (const page of repository.scan(input)) {
          await repository.claim({ key: k('taken-over'), fingerprint: 'fp', leaseSeconds: 60 });
          successor = await repository.get({ key: k('taken-over') });
          yield page;
        }
      }
    })();
    const result = await (await reconcilerOn(racing, clock, tableName)).sweep({ maxPagesPerSecond: 1000 });
    expect(result).toMatchObject({ stuckPending: 1, released: 0 });
    expect(await repository.get({ key: k('taken-over') })).toEqual(successor);
    expect(successor?.status).toBe('PENDING');
  });

  it('counts a stuck item it could not release (the store failed) and goes on with the rest', async () => {
    await repository.claim({ key: k('unreleasable'), fingerprint: 'fp', leaseSeconds: 30 });
    await repository.claim({ key: k('releasable'), fingerprint: 'fp', leaseSeconds: 30 });
    clock.advanceSeconds(33);
    const failing = new (class extends IdempotencyRepository {
      claim = repository.claim.bind(repository);
      complete = repository.complete.bind(repository);
      get = repository.get.bind(repository);
      renew = repository.renew.bind(repository);
      scan = (input: ScanInput) => repository.scan(input);
      fail = async (input: FailInput) => {
        if (input.key === k('unreleasable'))
          throw Object.assign(new Error('throttled'), { name: 'ThrottlingException' });
        return repository.fail(input);
      };
    })();
    const reconciler = await reconcilerOn(failing, clock, tableName);
    const logs = new CapturedLogs();
    logs.start();
    const result = await reconciler.sweep({ maxPagesPerSecond: 1000 }).finally(() => logs.stop());
    expect(result).toMatchObject({ stuckPending: 2, released: 1, unreleased: 1 });
    expect(logs.at('error')).toEqual([
      expect.objectContaining({
        msg: 'could not release a stuck item',
        key: k('unreleasable'),
        error: expect.stringMatching(/throttled/),
      }),
    ]);
    expect(await repository.get({ key: k('releasable') })).toMatchObject({ status: 'FAILED' });
    expect(await repository.get({ key: k('unreleasable') })).toMatchObject({ status: 'PENDING' });
  });
});

describe('IdempotencyReconciler on a table it shares (single-table layout, dynalite)', () => {
  const layout = LAYOUTS['single-table'];
  let dynamo: Dynalite;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(() => dynamo.stop());

  it("reads and touches the module's records only, never the table's other items", async () => {
    const clock = testClock();
    const client = localClient(dynamo.endpoint);
    const tableName = uniqueTableName('shared');
    await createIdempotencyTable(client, tableName, layout);
    // Another entity of the table, with attributes named like the module's: an order still "pending" payment.
    const order = { PK: { S: 'ORDER#1' }, SK: { S: 'ORDER#1' }, st: { S: 'PENDING' }, ttl: { N: '1' } };
    await client.send(new PutItemCommand({ TableName: tableName, Item: order }));
    const repository = new DynamoDbIdempotencyRepository({ client, tableName, clock, ...layout });
    await seed(repository, clock);

    const reconciler = await reconcilerOn(repository, clock, tableName);
    // The index of keys in flight (the app's order has no in_flight: it is not in it), and the canary counting all.
    expect(await reconciler.sweep({ maxPagesPerSecond: 1000, ttlCount: 'full' })).toEqual({
      scanned: 4 + 1,
      stuckPending: 1,
      released: 1,
      unreleased: 0,
      ttlStale: 2,
      ttlSampled: 4,
      ttlEstimated: false,
      indexed: true,
      deleted: 0,
    });
    const { Item } = await client.send(
      new GetItemCommand({ TableName: tableName, Key: { PK: order.PK, SK: order.SK }, ConsistentRead: true }),
    );
    expect(Item).toEqual(order);
  });
});

describe('scheduled sweeps', () => {
  it('run once the application has started, then every reconcileIntervalSeconds, and stop with it', async () => {
    const repository = new InMemoryIdempotencyRepository();
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ repository, reconcileIntervalSeconds: 1 })],
    }).compile();
    const sweep = jest.spyOn(moduleRef.get(IdempotencyReconciler), 'sweep');
    await moduleRef.init();
    expect(sweep).toHaveBeenCalledTimes(1);
    await new Promise((resolve) => setTimeout(resolve, 1300));
    expect(sweep).toHaveBeenCalledTimes(2);
    await moduleRef.close();
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(sweep).toHaveBeenCalledTimes(2);
  });

  it('export when the last sweep succeeded and how often they are meant to run', async () => {
    const tableName = uniqueTableName('scheduled');
    const clock = testClock();
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          repository: new InMemoryIdempotencyRepository(clock),
          tableName,
          reconcileIntervalSeconds: 60,
        }),
      ],
    })
      .overrideProvider(IdempotencyClock)
      .useValue(clock)
      .compile();
    const reconciler = moduleRef.get(IdempotencyReconciler);
    const before = await telemetry.scrape();
    expect(metricValue(before, 'idempotency_reconciler_interval_seconds', { table: tableName })).toBe(0);
    await moduleRef.init();
    await reconciler.sweep(); // as the bootstrap's own, which may still be running
    const text = await telemetry.scrape();
    expect(metricValue(text, 'idempotency_reconciler_interval_seconds', { table: tableName })).toBe(60);
    expect(metricValue(text, 'idempotency_reconciler_last_success_timestamp_seconds', { table: tableName })).toBe(
      clock.nowSeconds(),
    );
    await moduleRef.close();
  });

  /** Starts the module with timers under Jest's control, and counts sweeps over `hours` of timer time. */
  async function sweepsOver(hours: number, options: { reconcileIntervalSeconds?: number }): Promise<number> {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository(), ...options })],
      }).compile();
      const sweep = jest.spyOn(moduleRef.get(IdempotencyReconciler), 'sweep').mockResolvedValue({
        scanned: 0,
        stuckPending: 0,
        released: 0,
        unreleased: 0,
        ttlSampled: 0,
        ttlEstimated: false,
        indexed: false,
        ttlStale: 0,
        deleted: 0,
      });
      await moduleRef.init();
      for (let hour = 0; hour < hours; hour++) await jest.advanceTimersByTimeAsync(3_600_000);
      await moduleRef.close();
      return sweep.mock.calls.length;
    } finally {
      jest.useRealTimers();
    }
  }

  it('are off by default: no sweep in a day', async () => {
    expect(await sweepsOver(24, {})).toBe(0);
  });

  it('with an hourly interval, sweep at start and 24 times a day (the same measure sees them)', async () => {
    expect(await sweepsOver(24, { reconcileIntervalSeconds: 3600 })).toBe(25);
  });
});
