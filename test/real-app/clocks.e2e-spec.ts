import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Controller, Headers, Post } from '@nestjs/common';
import { Idempotent, IdempotencyModule, IdempotencyModuleOptions } from 'nestjs-dynamodb-idempotency';
import { post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { testClock } from '../support/clock';
import { createIdempotencyTable } from '../support/table';
import { metricValue, registerTestTelemetry } from '../support/telemetry';
import { Gates } from './gates';
import { untilStatus } from './records';

/**
 * Leases need bounded clock skew: a process whose clock runs ahead takes a lease over only once its end is more than
 * `clockSkewSeconds` behind that clock. Two instances on one table, the second with its clock shifted ahead.
 */
const telemetry = registerTestTelemetry();
const LEASE_SECONDS = 6;
const SKEW_SECONDS = 1.5;

@Controller('charges')
class ChargesController {
  constructor(private readonly gates: Gates) {}

  @Post()
  @Idempotent({ pendingTtlSeconds: LEASE_SECONDS })
  async charge(@Headers('idempotency-key') key: string) {
    return { key, run: await this.gates.pass(key) };
  }
}

describe('clock skew between instances', () => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let tableName: string;
  let keys = 0;
  const opened: TestApp[] = [];
  const newKey = () => `clocks-${++keys}`;

  const boot = async (clock: ManualClock, module: IdempotencyModuleOptions = {}) => {
    const app = await startApp(
      'express',
      {
        imports: [
          IdempotencyModule.forRoot({
            client,
            tableName,
            replayCache: { enabled: false },
            clockSkewSeconds: SKEW_SECONDS,
            ...module,
          }),
        ],
        controllers: [ChargesController],
        providers: [Gates],
      },
      { clock },
    );
    opened.push(app);
    return app;
  };

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    tableName = uniqueTableName('clocks');
    await createIdempotencyTable(client, tableName);
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((app) => app.close()));
  });
  afterAll(() => dynamo.stop());

  /** Two instances, the second's clock `aheadSeconds` ahead of the first's. */
  async function pair(aheadSeconds: number): Promise<[TestApp, TestApp]> {
    const start = testClock();
    return [await boot(start), await boot(new ManualClock(start.nowMs() + aheadSeconds * 1000))];
  }

  it('a clock ahead by less than the skew past the lease end gets 409, never a takeover', async () => {
    const [a, b] = await pair(LEASE_SECONDS + 1); // without the skew margin, b would see the lease as over
    const key = newKey();
    const owner = post(`${a.url}/charges`, {}, { 'Idempotency-Key': key });
    await Gates.reached(key);
    const duplicate = await post(`${b.url}/charges`, {}, { 'Idempotency-Key': key });
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers.get('retry-after')).toBe('1');
    expect(Gates.runsOf(key)).toBe(1);
    Gates.release(key);
    expect((await owner).status).toBe(201);
    await untilStatus(client, tableName, 'POST /charges', key, 'COMPLETED');
    expect((await post(`${b.url}/charges`, {}, { 'Idempotency-Key': key })).headers.get('idempotent-replayed')).toBe(
      'true',
    );
  });

  it('a clock ahead by more takes over, and the takeover is detected: renewal refused, lease_lost, re-execution counted', async () => {
    const [a, b] = await pair(LEASE_SECONDS + 2);
    const key = newKey();
    const before = await telemetry.scrape();
    const owner = post(`${a.url}/charges`, {}, { 'Idempotency-Key': key });
    await Gates.reached(key);
    const successor = post(`${b.url}/charges`, {}, { 'Idempotency-Key': key });
    await Gates.reached(key, 2);
    expect(Gates.runsOf(key)).toBe(2);

    // a's heartbeat (every third of the lease, in real time) finds the record owned by b.
    await sleep((LEASE_SECONDS / 3) * 1000 + 500);
    Gates.release(key, 2); // b's run
    expect((await successor).status).toBe(201);
    await untilStatus(client, tableName, 'POST /charges', key, 'COMPLETED');
    Gates.release(key, 1); // a's run: its completion is refused, its caller still gets its own result
    expect((await owner).status).toBe(201);

    const after = await telemetry.scrape();
    const grew = (name: string, labels: Record<string, string> = {}) =>
      metricValue(after, name, labels) - metricValue(before, name, labels);
    expect(grew('dedup_lease_renewal_refused_total')).toBe(1);
    expect(grew('idempotency_requests_total', { outcome: 'lease_lost' })).toBe(1);
    expect(grew('dedup_duplicate_reexecution_total')).toBe(1);
  });

  it('fails startup naming both settings when clockSkewSeconds is a third of the lease or more', async () => {
    await expect(boot(testClock(), { clockSkewSeconds: 20, pendingTtlSeconds: 60 })).rejects.toThrow(
      /clockSkewSeconds \(20\) must be less than a third of pendingTtlSeconds \(60\)/,
    );
    // A route's own, shorter lease is checked too, and named.
    await expect(boot(testClock(), { clockSkewSeconds: 2 })).rejects.toThrow(
      /ChargesController\.charge: clockSkewSeconds \(2\) must be less than a third of pendingTtlSeconds \(6\)/,
    );
  });
});
