import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  checkIdempotencyTable,
  DynamoDbIdempotencyRepository,
  IdempotencyClock,
  IdempotencyModule,
  IdempotencyReconciler,
  IdempotencyService,
} from 'nestjs-dynamodb-idempotency';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { localClient, uniqueTableName } from '../support/dynalite';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';

/** How DynamoDB describes a global table: its replicas, and its consistency mode. */
const globalTable =
  (consistency: 'STRONG' | 'EVENTUAL') =>
  (answer: Record<string, any>): Record<string, any> => ({
    ...answer,
    Table: {
      ...answer.Table,
      MultiRegionConsistency: consistency,
      Replicas: [
        { RegionName: 'us-east-1', ReplicaStatus: 'ACTIVE' },
        { RegionName: 'us-east-2', ReplicaStatus: 'ACTIVE' },
      ],
    },
  });

/**
 * A global table, as the module meets one: DynamoDB Local (which has transactions and TTL) behind a proxy whose
 * DescribeTable answers as DynamoDB does for a global table (no local server implements one). On a multi-Region
 * strongly consistent (MRSC) table, which has neither transactions nor TTL (AWS, "How DynamoDB global tables work"),
 * the module says so at startup, refuses commitWith, and its reconciler deletes expired records.
 */
describeOnDynamoDbLocal('a global table', () => {
  let endpoint: string;
  let client: DynamoDBClient;
  let proxy: FaultProxy;
  const contexts: INestApplicationContext[] = [];

  beforeAll(async () => {
    ({ endpoint } = await startStore('dynamodb-local'));
    client = localClient(endpoint);
    proxy = await startFaultProxy(endpoint);
  });
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
    proxy.rewrite = undefined;
  });
  afterAll(async () => {
    client.destroy();
    await proxy.stop();
  });

  async function boot(tableName: string, logs: CapturedLogs, startupCheck = true) {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ client: localClient(proxy.endpoint), tableName, startupCheck })],
    }).compile();
    logs.start();
    const context = await moduleRef.init().finally(() => logs.stop());
    contexts.push(context);
    return context;
  }

  it('MRSC: says at startup what changes, and commitWith is refused before anything is written', async () => {
    const tableName = uniqueTableName('mrsc');
    await createIdempotencyTable(client, tableName);
    proxy.rewrite = { operation: 'DescribeTable', rewrite: globalTable('STRONG') };
    const logs = new CapturedLogs();
    const service = (await boot(tableName, logs)).get(IdempotencyService);
    const warnings = logs.at('warn').map(String);
    expect(warnings).toEqual([
      expect.stringContaining(`"${tableName}" is a multi-Region strongly consistent (MRSC) global table`),
      expect.stringContaining(
        'commitWith is unavailable: a multi-Region strongly consistent (MRSC) global table has no transactions',
      ),
      expect.stringContaining(
        'TTL is unavailable on MRSC tables, so nothing deletes expired records: the reconciler deletes them',
      ),
    ]);
    // DynamoDB Local has transactions; the table's mode decides.
    expect(await service.commitSupported()).toBe(false);
    let ran = false;
    await expect(
      service.execute({ operation: 'mrsc', key: 'order-1' }, (context) => {
        expect(context.canCommitWith).toBe(false);
        context.commitWith({ Put: { TableName: tableName, Item: { pk: 'order-1' } } });
        ran = true;
      }),
    ).rejects.toThrow(/no transactions \(dynalite, a multi-Region strongly consistent global table/);
    expect(ran).toBe(false);
    // The deploy-time check notes it instead of failing on TTL.
    const check = await checkIdempotencyTable(localClient(proxy.endpoint), tableName);
    expect(check.findings).toContain(
      'note: a multi-Region strongly consistent (MRSC) global table: no TTL there (the reconciler deletes expired records: run it) and no commitWith (no transactions)',
    );
  });

  it('MRSC with startupCheck: false: the first call describes the table, says what changes, and refuses commitWith before anything is written', async () => {
    const tableName = uniqueTableName('mrsclazy');
    await createIdempotencyTable(client, tableName);
    proxy.rewrite = { operation: 'DescribeTable', rewrite: globalTable('STRONG') };
    const logs = new CapturedLogs();
    const seen = proxy.operations.length;
    const service = (await boot(tableName, logs, false)).get(IdempotencyService);
    const describes = () => proxy.operations.slice(seen).filter((operation) => operation === 'DescribeTable').length;
    expect(describes()).toBe(0);
    let ran = false;
    logs.start();
    const call = service.execute({ operation: 'mrsc', key: 'order-1' }, (context) => {
      expect(context.canCommitWith).toBe(false);
      context.commitWith({ Put: { TableName: tableName, Item: { pk: 'order-1' } } });
      ran = true;
    });
    await expect(call.finally(() => logs.stop())).rejects.toThrow(/no transactions/);
    expect(ran).toBe(false);
    expect(describes()).toBe(1);
    expect(logs.at('warn').map(String)).toEqual([
      expect.stringContaining(`"${tableName}" is a multi-Region strongly consistent (MRSC) global table`),
      expect.stringContaining('commitWith is unavailable'),
      expect.stringContaining('TTL is unavailable on MRSC tables'),
    ]);
    // The key was released: nothing stays PENDING, and the next call asks nothing again.
    const again = await service.execute({ operation: 'mrsc', key: 'order-1' }, () => 'without commitWith');
    expect(again).toBe('without commitWith');
    expect(describes()).toBe(1);
  });

  it('MRSC: the reconciler deletes expired finished records, as TTL would; elsewhere it leaves them to TTL', async () => {
    const tableName = uniqueTableName('mrscttl');
    await createIdempotencyTable(client, tableName);
    const clock = new ManualClock();
    const direct = new DynamoDbIdempotencyRepository({ client, tableName, clock });
    const at = (name: string) => recordKey('fn ttl', undefined, name);
    for (const key of [at('done'), at('failed'), at('fresh')]) {
      const claim = await direct.claim({ key, fingerprint: 'fp', leaseSeconds: 30 });
      if (!claim.claimed) throw new Error('not claimed');
      const ttlSeconds = key === at('fresh') ? 3600 : 60;
      if (key === at('failed')) await direct.fail({ key, claimToken: claim.claimToken, ttlSeconds });
      else
        await direct.complete({
          key,
          claimToken: claim.claimToken,
          response: { statusCode: 201, headers: {}, body: {} },
          ttlSeconds,
        });
    }
    clock.advanceSeconds(120);
    const sweepOn = async (via: DynamoDBClient) => {
      const repository = new DynamoDbIdempotencyRepository({ client: via, tableName, clock });
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ repository, tableName, startupCheck: false })],
      })
        .overrideProvider(IdempotencyClock)
        .useValue(clock)
        .compile();
      const context = await moduleRef.init();
      contexts.push(context);
      return context.get(IdempotencyReconciler).sweep({ maxPagesPerSecond: 1000 });
    };
    // A table of one Region: its TTL deletes them; the sweep only counts them.
    expect(await sweepOn(client)).toMatchObject({ ttlStale: 2, deleted: 0 });
    proxy.rewrite = { operation: 'DescribeTable', rewrite: globalTable('STRONG') };
    expect(await sweepOn(localClient(proxy.endpoint))).toMatchObject({ ttlStale: 2, deleted: 2 });
    expect(await direct.get({ key: at('done') })).toBeUndefined();
    expect(await direct.get({ key: at('failed') })).toBeUndefined();
    expect(await direct.get({ key: at('fresh') })).toMatchObject({ status: 'COMPLETED' });
  });

  it('MREC: warns that two Regions can claim one key at once, and keeps commitWith', async () => {
    const tableName = uniqueTableName('mrec');
    await createIdempotencyTable(client, tableName);
    proxy.rewrite = { operation: 'DescribeTable', rewrite: globalTable('EVENTUAL') };
    const logs = new CapturedLogs();
    const service = (await boot(tableName, logs)).get(IdempotencyService);
    expect(logs.at('warn').map(String)).toEqual([
      expect.stringContaining(
        'is a global table with multi-Region eventual consistency (MREC): a conditional write is checked only in its own Region',
      ),
    ]);
    expect(await service.commitSupported()).toBe(true);
  });

  it('a table of one Region: no word at startup', async () => {
    const tableName = uniqueTableName('oneregion');
    await createIdempotencyTable(client, tableName);
    const logs = new CapturedLogs();
    await boot(tableName, logs);
    expect(logs.at('warn')).toEqual([]);
  });
});
