import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Test } from '@nestjs/testing';
import {
  CompleteInput,
  IdempotencyModule,
  IdempotencyRepository,
  IdempotencyService,
  IdempotencyTelemetry,
  InMemoryIdempotencyRepository,
  CompleteResult,
} from 'nestjs-dynamodb-idempotency';
import { post, startApp, TestApp } from '../support/app';
import { withInMemoryService } from '../support/service';
import { metricValue, registerTestTelemetry } from '../support/telemetry';
import { paymentsModule, Runs } from '../http/payments.fixture';
import { PaymentsScenario, startPaymentsScenario } from '../http/payments.scenario';

const telemetry = registerTestTelemetry();

/** Simulates the SDK retrying a completion whose first attempt landed: the retry finds the record completed. */
class RetriedCompletion extends InMemoryIdempotencyRepository {
  async complete(input: CompleteInput): Promise<CompleteResult> {
    await super.complete(input);
    return super.complete(input);
  }
}

describe('spans and counters', () => {
  let scenario: PaymentsScenario;
  let test: TestApp;

  beforeAll(async () => {
    // Without the replay cache, so that every duplicate reaches the store and shows in its spans and counters.
    scenario = await startPaymentsScenario('express', { module: { replayCache: { enabled: false } } });
    test = scenario.test;
  });
  afterAll(() => scenario.stop());

  it('wraps every claim in a dedup.claim span with the result and a hashed key', async () => {
    telemetry.spans.reset();
    const key = 'raw-key-never-in-telemetry';
    await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': key });
    await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': key });
    const claims = telemetry.spans.getFinishedSpans().filter((span) => span.name === 'dedup.claim');
    expect(claims.map((span) => span.attributes['dynamo.condition_result'])).toEqual(['won', 'lost']);
    for (const span of claims) {
      expect(span.attributes['idempotency.key']).toMatch(/^POST \/payments#[0-9a-f]{64}$/);
      expect(JSON.stringify(span.attributes)).not.toContain(key);
    }
    const completes = telemetry.spans.getFinishedSpans().filter((span) => span.name === 'dedup.complete');
    expect(completes.map((span) => span.attributes['dynamo.condition_result'])).toEqual(['won']);
    expect(completes[0].attributes['idempotency.key']).toBe(claims[0].attributes['idempotency.key']);
  });

  it("wraps optimistic mode's put in a dedup.put_completed span with the result and a hashed key", async () => {
    await withInMemoryService(async (service) => {
      telemetry.spans.reset();
      const key = 'optimistic-raw-key';
      for (let i = 0; i < 2; i++)
        await service.execute({ operation: 'quote', key, mode: 'optimistic' }, async () => 'q');
      const puts = telemetry.spans.getFinishedSpans().filter((span) => span.name === 'dedup.put_completed');
      expect(puts.map((span) => span.attributes['dynamo.condition_result'])).toEqual(['won', 'exists']);
      for (const span of puts) {
        expect(span.attributes['idempotency.key']).toMatch(/^fn quote#[0-9a-f]{64}$/);
        expect(JSON.stringify(span.attributes)).not.toContain(key);
      }
    });
  });

  it('counts conditional write rejections by table and operation, and store latency', async () => {
    const before = await telemetry.scrape();
    const labels = { table: scenario.tableName, operation: 'claim' };
    const key = 'counted';
    await post(`${test.url}/payments`, { amount: 2 }, { 'Idempotency-Key': key });
    await post(`${test.url}/payments`, { amount: 2 }, { 'Idempotency-Key': key });
    await post(`${test.url}/payments`, { amount: 2 }, { 'Idempotency-Key': key });
    const after = await telemetry.scrape();
    expect(metricValue(after, 'dynamo_conditional_write_rejected_total', labels)).toBe(
      metricValue(before, 'dynamo_conditional_write_rejected_total', labels) + 2,
    );
    const replayed = { outcome: 'replayed', transport: 'http' };
    expect(metricValue(after, 'idempotency_requests_total', replayed)).toBe(
      metricValue(before, 'idempotency_requests_total', replayed) + 2,
    );
    expect(
      metricValue(after, 'idempotency_store_call_duration_seconds_count', {
        operation: 'claim',
        result: 'ConditionalCheckFailedException',
      }),
    ).toBeGreaterThanOrEqual(2);
    expect(
      metricValue(after, 'idempotency_store_call_duration_seconds_count', { operation: 'complete', result: 'ok' }),
    ).toBeGreaterThanOrEqual(1);
  });

  it('counts a handler that ran for a key another claim had completed (the orphaned worker)', async () => {
    const before = metricValue(await telemetry.scrape(), 'dedup_duplicate_reexecution_total');
    const runs = test.get(Runs);
    const orphan = post(`${test.url}/payments/parked/re`, {}, { 'Idempotency-Key': 'reexecuted' });
    while (!runs.gates.get('re:1')) await new Promise((resolve) => setTimeout(resolve, 5));
    test.clock.advanceSeconds(7); // past the 5 s lease and its clock-skew margin
    const successor = post(`${test.url}/payments/parked/re`, {}, { 'Idempotency-Key': 'reexecuted' });
    while (!runs.gates.get('re:2')) await new Promise((resolve) => setTimeout(resolve, 5));
    runs.gates.get('re:2')!();
    await successor;
    runs.gates.get('re:1')!();
    await orphan;
    const after = await telemetry.scrape();
    expect(metricValue(after, 'dedup_duplicate_reexecution_total')).toBe(before + 1);
    expect(metricValue(after, 'idempotency_requests_total', { outcome: 'lease_lost' })).toBeGreaterThanOrEqual(1);
  });
});

describe('the benign completion race', () => {
  it('is counted and marked already_completed on the dedup.complete span, and the caller gets its response', async () => {
    const unused = new DynamoDBClient({ region: 'us-east-1' });
    const repository: IdempotencyRepository = new RetriedCompletion();
    const test = await startApp('express', paymentsModule(unused, 'unused', { repository }));
    try {
      telemetry.spans.reset();
      const before = metricValue(await telemetry.scrape(), 'dedup_concurrent_completion_race_total');
      const response = await post(`${test.url}/payments`, { amount: 3 }, { 'Idempotency-Key': 'raced' });
      expect(response.status).toBe(201);
      expect(metricValue(await telemetry.scrape(), 'dedup_concurrent_completion_race_total')).toBe(before + 1);
      const complete = telemetry.spans.getFinishedSpans().find((span) => span.name === 'dedup.complete');
      expect(complete?.attributes['dynamo.condition_result']).toBe('already_completed');
    } finally {
      await test.close();
    }
  });
});

describe('the replay cache', () => {
  it('counts its lookups by table and result: a first request misses, a duplicate in the same process hits', async () => {
    const scenario = await startPaymentsScenario('express');
    const lookups = async (result: string) =>
      metricValue(await telemetry.scrape(), 'idempotency_replay_cache_lookups_total', {
        table: scenario.tableName,
        result,
      });
    try {
      await post(`${scenario.test.url}/payments`, { amount: 4 }, { 'Idempotency-Key': 'cached' });
      expect([await lookups('miss'), await lookups('hit')]).toEqual([1, 0]);
      const replay = await post(`${scenario.test.url}/payments`, { amount: 4 }, { 'Idempotency-Key': 'cached' });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect([await lookups('miss'), await lookups('hit')]).toEqual([1, 1]);
    } finally {
      await scenario.stop();
    }
  });

  it('counts the lookups of optimistic mode too: its first request misses, a duplicate in the same process hits', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository() })],
    }).compile();
    const service = (await moduleRef.init()).get(IdempotencyService);
    const lookups = jest.spyOn(moduleRef.get(IdempotencyTelemetry), 'replayCacheLookup');
    try {
      for (let i = 0; i < 2; i++)
        await service.execute({ operation: 'quote', key: 'optimistic-cached', mode: 'optimistic' }, async () => 'q');
      expect(lookups.mock.calls).toEqual([[false], [true]]);
    } finally {
      await moduleRef.close();
    }
  });

  it('counts nothing when it is off', async () => {
    const scenario = await startPaymentsScenario('express', { module: { replayCache: { enabled: false } } });
    try {
      await post(`${scenario.test.url}/payments`, { amount: 5 }, { 'Idempotency-Key': 'uncached' });
      await post(`${scenario.test.url}/payments`, { amount: 5 }, { 'Idempotency-Key': 'uncached' });
      const text = await telemetry.scrape();
      expect(text).not.toMatch(new RegExp(`idempotency_replay_cache_lookups_total\\{[^}]*${scenario.tableName}`));
    } finally {
      await scenario.stop();
    }
  });
});
