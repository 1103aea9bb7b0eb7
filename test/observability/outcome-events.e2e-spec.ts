import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyOutcomeEvent,
  IdempotencyService,
  OUTCOME_CHANNEL,
} from 'nestjs-dynamodb-idempotency';
import { Platform, PLATFORMS, post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';

@Controller('hooked')
class HookedController {
  @Post('orders')
  @Idempotent()
  create(@Body() body: { amount: number }) {
    return { ordered: body.amount };
  }

  @Post('accepted')
  @Idempotent({ mode: 'optimistic' })
  @HttpCode(202)
  accept() {
    return { accepted: true };
  }
}

/** `onOutcome` and the diagnostics channel: one event per protected call, whoever listens; replay cache off. */
describe.each(PLATFORMS)('outcome events on %s', (platform: Platform) => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let app: TestApp;
  let hookThrows = false;
  const hooked: IdempotencyOutcomeEvent[] = [];
  const published: IdempotencyOutcomeEvent[] = [];
  const onPublished = (event: unknown) => published.push(event as IdempotencyOutcomeEvent);
  let keys = 0;
  const newKey = () => `outcome-${platform}-${++keys}`;
  /** The events of one key's calls (the suite's tests run in any order). */
  const eventsOf = (events: IdempotencyOutcomeEvent[], recordKey: string) =>
    events.filter((event) => event.recordKey === recordKey);
  const recordKeyOf = (events: IdempotencyOutcomeEvent[], before: number) => events[before].recordKey!;

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    const tableName = uniqueTableName('outcomes');
    await createIdempotencyTable(client, tableName);
    app = await startApp(platform, {
      imports: [
        IdempotencyModule.forRoot({
          client,
          tableName,
          replayCache: { enabled: false },
          onOutcome: (event) => {
            if (hookThrows) throw new Error('the metrics backend is down');
            hooked.push(event);
          },
        }),
      ],
      controllers: [HookedController],
    });
    subscribe(OUTCOME_CHANNEL, onPublished);
  });
  afterAll(async () => {
    unsubscribe(OUTCOME_CHANNEL, onPublished);
    await app.close();
    await dynamo.stop();
  });

  it('reports the first call as executed and a duplicate as replayed, with status, record key and duration', async () => {
    const key = newKey();
    const before = hooked.length;
    await post(`${app.url}/hooked/orders`, { amount: 5 }, { 'Idempotency-Key': key });
    const recordKey = recordKeyOf(hooked, before);
    await post(`${app.url}/hooked/orders`, { amount: 5 }, { 'Idempotency-Key': key });
    await post(`${app.url}/hooked/orders`, { amount: 6 }, { 'Idempotency-Key': key });
    const events = eventsOf(hooked, recordKey);
    expect(events.map(({ outcome, statusCode }) => [outcome, statusCode])).toEqual([
      ['executed', 201],
      ['replayed', 201],
      ['mismatch', 422],
    ]);
    for (const event of events) {
      expect(event).toMatchObject({ transport: 'http', operation: 'POST /hooked/orders', mode: 'lease' });
      expect(event.recordKey).toMatch(/^POST \/hooked\/orders#[0-9a-f]{64}$/);
      expect(event.durationMs).toBeGreaterThanOrEqual(0);
      expect(event).not.toHaveProperty('partition');
    }
    // The diagnostics channel has the same events.
    expect(eventsOf(published, recordKey)).toEqual(events);
  });

  it('reports a call without a key as missing-key, without a record key', async () => {
    const before = hooked.length;
    const response = await post(`${app.url}/hooked/orders`, { amount: 1 });
    expect(response.status).toBe(400);
    expect(hooked.slice(before)).toEqual([
      {
        outcome: 'missing-key',
        transport: 'http',
        operation: 'POST /hooked/orders',
        statusCode: 400,
        mode: 'lease',
        durationMs: expect.any(Number),
      },
    ]);
  });

  it('reports an optimistic route in its mode, a call without a key included', async () => {
    const key = newKey();
    const before = hooked.length;
    await post(`${app.url}/hooked/accepted`, {}, { 'Idempotency-Key': key });
    await post(`${app.url}/hooked/accepted`, {});
    expect(hooked.slice(before)).toMatchObject([
      { outcome: 'executed', statusCode: 202, mode: 'optimistic' },
      { outcome: 'missing-key', statusCode: 400, mode: 'optimistic' },
    ]);
  });

  it('reports execute() calls as the function transport', async () => {
    const service = app.get(IdempotencyService);
    const before = hooked.length;
    await service.execute({ operation: 'charge-card', key: newKey() }, () => 'charged');
    expect(hooked.slice(before)).toMatchObject([
      { outcome: 'executed', transport: 'function', operation: 'fn charge-card', statusCode: 200 },
    ]);
  });

  it('never changes an answer when the hook throws, and logs it once a minute at most', async () => {
    const logs = new CapturedLogs();
    logs.start();
    hookThrows = true;
    try {
      const key = newKey();
      const first = await post(`${app.url}/hooked/orders`, { amount: 7 }, { 'Idempotency-Key': key });
      const replay = await post(`${app.url}/hooked/orders`, { amount: 7 }, { 'Idempotency-Key': key });
      expect(first.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(first.text);
      // Two events, two throws: one log line (the only test whose hook throws, so the minute starts here).
      const logged = logs.at('error').filter((entry) => JSON.stringify(entry).includes('onOutcome hook failed'));
      expect(logged).toHaveLength(1);
      expect(JSON.stringify(logged[0])).toContain('the metrics backend is down');
    } finally {
      hookThrows = false;
      logs.stop();
    }
  });
});
