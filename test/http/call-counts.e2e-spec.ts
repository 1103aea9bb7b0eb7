import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Controller, Headers, Post } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { post, startApp, TestApp } from '../support/app';
import { countCalls, sendTimes } from '../support/call-counter';
import { localClient, uniqueTableName } from '../support/dynalite';
import { Engine, ENGINES, startStore } from '../support/engines';
import { RunsByKey } from '../support/runs-by-key';
import { createIdempotencyTable } from '../support/table';

/** Per key, what its first handler waits on before it returns: a test's barrier, released once its duplicates answered. */
const barriers = new Map<string, Promise<void>>();

@Controller('counted')
class CountedController {
  constructor(private readonly runs: RunsByKey) {}

  @Post()
  @Idempotent()
  async create(@Headers('idempotency-key') key: string) {
    this.runs.count(key);
    await barriers.get(key);
    return { created: key };
  }

  @Post('optimistic')
  @Idempotent({ mode: 'optimistic' })
  optimistic(@Headers('idempotency-key') key: string) {
    this.runs.count(key);
    return { accepted: key };
  }
}

/**
 * The DynamoDB calls each scenario costs, asserted, so a change in round trips fails here rather than in a benchmark
 * nobody reran. dynalite ignores `ReturnValuesOnConditionCheckFailure` (a lost claim reads the record); DynamoDB
 * Local returns it, as DynamoDB does.
 */
describe.each(ENGINES)('DynamoDB calls per scenario on %s', (engine: Engine) => {
  let store: { endpoint: string; stop(): Promise<void> };
  let client: DynamoDBClient;
  const apps: Record<'cached' | 'uncached', TestApp> = {} as never;
  const calls: Record<'cached' | 'uncached', ReturnType<typeof countCalls>> = {} as never;
  const clients: Record<'cached' | 'uncached', DynamoDBClient> = {} as never;
  let keys = 0;
  const newKey = () => `counted-${engine}-${process.pid}-${++keys}`;
  const send = (app: TestApp, key: string, path = '/counted') =>
    post(`${app.url}${path}`, {}, { 'Idempotency-Key': key });

  beforeAll(async () => {
    store = await startStore(engine);
    client = localClient(store.endpoint);
    const tableName = uniqueTableName('counted');
    await createIdempotencyTable(client, tableName);
    for (const cache of ['cached', 'uncached'] as const) {
      const own = (clients[cache] = localClient(store.endpoint));
      calls[cache] = countCalls(own);
      apps[cache] = await startApp(
        'express',
        {
          imports: [
            IdempotencyModule.forRoot({
              client: own,
              tableName,
              replayCache: { enabled: cache === 'cached' },
              startupCheck: false,
            }),
          ],
          controllers: [CountedController],
          providers: [RunsByKey],
        },
        { realTime: true },
      );
    }
  }, 60_000);
  afterAll(async () => {
    await Promise.all(Object.values(apps).map((app) => app.close()));
    client.destroy();
    await store.stop();
  });

  /** The calls `scenario` makes through `app`'s client. */
  async function counted(cache: 'cached' | 'uncached', scenario: () => Promise<unknown>) {
    await scenario(); // warm: the first request of an app asks whether the store has transactions
    calls[cache].reset();
    return calls[cache].counts;
  }

  it('a first request: the claim and the completion', async () => {
    await send(apps.uncached, newKey());
    calls.uncached.reset();
    await send(apps.uncached, newKey());
    expect(calls.uncached.counts).toEqual({ UpdateItem: 2 });
  });

  it('a burst of 20 concurrent duplicates while the first runs: one claim, one completion, reads the duplicates share (each gathers 25 ms)', async () => {
    await send(apps.uncached, newKey());
    calls.uncached.reset();
    const key = newKey();
    let release!: () => void;
    barriers.set(key, new Promise((resolve) => (release = resolve)));
    const reads = sendTimes(clients.uncached, 'GetItem');
    const first = send(apps.uncached, key);
    // The owner is running (its claim is in the store) before any duplicate is sent, and it returns only once every
    // duplicate has been answered: the overlap is certain, however loaded the machine.
    while (RunsByKey.of(key) === 0) await sleep(5);
    const duplicates = await Promise.all(Array.from({ length: 19 }, () => send(apps.uncached, key)));
    release();
    expect((await first).status).toBe(201);
    expect(duplicates.map(({ status }) => status)).toEqual(Array(19).fill(409));
    expect(RunsByKey.of(key)).toBe(1);
    expect(calls.uncached.counts.UpdateItem).toBe(2);
    // Each 409 is confirmed in the store (an operator may have released the key). The duplicates share their reads: a
    // read is sent 25 ms after the first duplicate that found none under way, and answers every duplicate that arrives
    // before it returns. So reads start at least 25 ms apart, however the burst spreads (one read when it arrives within
    // 25 ms, more on a loaded machine), and never one per duplicate.
    const sent = reads.stop();
    expect(calls.uncached.counts.GetItem).toBe(sent.length);
    expect(sent.length).toBeGreaterThanOrEqual(1);
    expect(sent.length).toBeLessThan(19);
    for (let i = 1; i < sent.length; i++) expect(sent[i] - sent[i - 1]).toBeGreaterThanOrEqual(25);
  });

  it('a replay from the cache: no call; without the cache: the lost claim alone (and its read on dynalite)', async () => {
    const key = newKey();
    await send(apps.cached, key);
    calls.cached.reset();
    expect((await send(apps.cached, key)).headers.get('idempotent-replayed')).toBe('true');
    expect(calls.cached.counts).toEqual({});
    await send(apps.uncached, key);
    calls.uncached.reset();
    expect((await send(apps.uncached, key)).headers.get('idempotent-replayed')).toBe('true');
    expect(calls.uncached.counts).toEqual(engine === 'dynalite' ? { UpdateItem: 1, GetItem: 1 } : { UpdateItem: 1 });
  });

  it('an optimistic first request: one write', async () => {
    const counts = await counted('uncached', () => send(apps.uncached, newKey(), '/counted/optimistic'));
    await send(apps.uncached, newKey(), '/counted/optimistic');
    expect(counts).toEqual({ PutItem: 1 });
  });
});
