import { IdempotencyReconciler } from 'nestjs-dynamodb-idempotency';
import { configFromEnv } from '../../apps/orders-api/src/config';
import { RunningOrdersApi, startOrdersApi } from '../../apps/orders-api/src/orders-api';
import { post } from '../support/app';
import { Dynalite, startDynalite } from '../support/dynalite';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { metricValue } from '../support/telemetry';

const order = { item: 'lamp', quantity: 1 };

describe('orders-api GET /metrics (Prometheus) and GET /health under faults', () => {
  let dynamo: Dynalite;
  let proxy: FaultProxy;
  let api: RunningOrdersApi;

  beforeAll(async () => {
    dynamo = await startDynalite();
    proxy = await startFaultProxy(dynamo.endpoint);
    api = await startOrdersApi(
      configFromEnv({ PORT: '0', DYNAMODB_ENDPOINT: proxy.endpoint, ORDER_PROCESSING_DELAY_MS: '300' }),
      { logger: false },
    );
  });
  afterAll(async () => {
    await api.close();
    await proxy.stop();
    await dynamo.stop();
  });

  it('counts a replay, a 409 and an injected throttle under the right labels', async () => {
    await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'm-replay' });
    expect((await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'm-replay' })).status).toBe(201);

    const conflict = await Promise.all([
      post(`${api.url}/orders`, order, { 'Idempotency-Key': 'm-conflict' }),
      post(`${api.url}/orders`, order, { 'Idempotency-Key': 'm-conflict' }),
    ]);
    expect(conflict.map((r) => r.status).sort()).toEqual([201, 409]);

    proxy.mode = 'throttle';
    const throttled = await post(`${api.url}/orders`, order, { 'Idempotency-Key': 'm-throttled' });
    const health = await fetch(`${api.url}/health`);
    proxy.mode = 'pass';
    expect(throttled.status).toBe(503);
    expect(health.status).toBe(503);
    expect(((await health.json()) as { error: Record<string, unknown> }).error).toMatchObject({
      idempotency_store: { status: 'down', dynamo_error_code: 'ProvisionedThroughputExceededException' },
    });

    const scrape = await fetch(`${api.url}/metrics`);
    expect(scrape.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await scrape.text();
    const requests = (outcome: string) => metricValue(text, 'idempotency_requests_total', { outcome });
    expect(requests('executed')).toBe(2);
    expect(requests('replayed')).toBe(1);
    expect(requests('in_flight')).toBe(1);
    expect(requests('store_throttled')).toBe(1);
    // Both duplicates were answered in this process (the replay from the cache, the 409 by joining the running
    // claim): no conditional write was rejected. test/observability counts rejections with the cache off.
    expect(
      metricValue(text, 'dynamo_conditional_write_rejected_total', { table: 'idempotency_keys', operation: 'claim' }),
    ).toBe(0);
    expect(
      metricValue(text, 'idempotency_store_call_duration_seconds_count', {
        operation: 'claim',
        result: 'ProvisionedThroughputExceededException',
      }),
    ).toBe(1);
    expect(text).toContain('# TYPE dedup_duplicate_reexecution_total counter');
    expect(metricValue(text, 'dedup_duplicate_reexecution_total')).toBe(0);
  });

  it('exposes the reconciler gauges after a sweep', async () => {
    await api.app.get(IdempotencyReconciler).sweep();
    const text = await (await fetch(`${api.url}/metrics`)).text();
    expect(text).toContain('# TYPE dedup_stuck_pending_total gauge');
    expect(text).toContain('# TYPE dynamo_ttl_stale_items_total gauge');
    expect(text).toMatch(/^dedup_stuck_pending_total\{table="idempotency_keys"[^}]*\} 0$/m);
    expect(text).toMatch(/^dynamo_ttl_stale_items_total\{table="idempotency_keys"[^}]*\} 0$/m);
  });
});
