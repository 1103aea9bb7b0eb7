import { setTimeout as sleep } from 'node:timers/promises';
import { Body, Controller, Post } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { Platform, PLATFORMS, post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';

let runs = 0;

@Controller('reports')
class ReportsController {
  @Post()
  @Idempotent({ pendingTtlSeconds: 2 })
  async build(@Body() body: { ms: number }) {
    runs += 1;
    await sleep(body.ms);
    return { report: 'ready', run: runs };
  }
}

/**
 * A handler that runs 3.5 × its lease (lease 2 s, handler 7 s), in real time on dynalite: its owner renews the lease,
 * so duplicates sent to a second instance (its own cache and single-flight: every duplicate reaches DynamoDB) get
 * 409 with `Retry-After: 1` throughout, and the replay afterwards. The handler runs once.
 */
describe.each(PLATFORMS)('a handler slower than its lease on %s', (platform: Platform) => {
  let dynamo: Dynalite;
  let owner: TestApp;
  let other: TestApp;
  beforeAll(async () => {
    dynamo = await startDynalite();
    const client = localClient(dynamo.endpoint);
    const tableName = uniqueTableName('heartbeat');
    await createIdempotencyTable(client, tableName);
    // Real time: the lease must run out (or not) for real.
    const start = () =>
      startApp(
        platform,
        {
          imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false } })],
          controllers: [ReportsController],
        },
        { realTime: true },
      );
    [owner, other] = await Promise.all([start(), start()]);
  });
  afterAll(async () => {
    await Promise.all([owner.close(), other.close()]);
    await dynamo.stop();
  });

  it('runs once; duplicates get 409 with Retry-After: 1 while it runs, then the replay', async () => {
    const before = runs;
    const key = `slow-report-${platform}`;
    let done = false;
    const startedAt = Date.now();
    const first = post(`${owner.url}/reports`, { ms: 7000 }, { 'Idempotency-Key': key }).finally(() => (done = true));
    await sleep(200);
    const duringRun: Array<{ status: number; retryAfter: string | null; sentAfterMs: number }> = [];
    while (!done) {
      const sentAfterMs = Date.now() - startedAt;
      const duplicate = await post(`${other.url}/reports`, { ms: 7000 }, { 'Idempotency-Key': key });
      duringRun.push({ status: duplicate.status, retryAfter: duplicate.headers.get('retry-after'), sentAfterMs });
      await sleep(500);
    }
    const response = await first;
    const replay = await post(`${other.url}/reports`, { ms: 7000 }, { 'Idempotency-Key': key });

    expect(response.status).toBe(201);
    // Every duplicate while it ran was refused (the last one may have arrived just after the completion).
    const refused = duringRun.filter(({ status }) => status === 409);
    expect(refused.length).toBeGreaterThanOrEqual(duringRun.length - 1);
    // Refused long after an unrenewed 2 s lease would have let it claim (how many were sent depends on the load).
    expect(refused.filter(({ sentAfterMs }) => sentAfterMs > 4500).length).toBeGreaterThanOrEqual(1);
    expect(refused.every(({ retryAfter }) => retryAfter === '1')).toBe(true);
    expect(replay.status).toBe(201);
    expect(replay.text).toBe(response.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(before + 1);
  }, 20_000);
});
