import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { PLATFORMS, post, TestApp } from '../support/app';
import { PLATFORM_ENGINES } from '../support/engines';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { CapturedLogs } from '../support/logs';
import { scanTable } from '../support/table';
import { Runs } from './payments.fixture';
import { PaymentsScenario, startPaymentsScenario } from './payments.scenario';

describe.each(PLATFORM_ENGINES)('store faults on %s, %s, %s layout', (platform, engine, layout) => {
  let scenario: PaymentsScenario;
  let proxy: FaultProxy;
  let test: TestApp;
  let keys = 0;
  const newKey = () => `key-${platform}-${++keys}`;

  beforeAll(async () => {
    // The replay cache would answer duplicates from memory; these tests are about what DynamoDB says.
    scenario = await startPaymentsScenario(platform, {
      engine,
      layout,
      appEndpoint: async (dynamo) => {
        proxy = await startFaultProxy(dynamo.endpoint);
        return proxy.endpoint;
      },
      module: { replayCache: { enabled: false } },
    });
    test = scenario.test;
  });
  afterEach(() => {
    proxy.mode = 'pass';
    proxy.failNext = undefined;
  });
  afterAll(async () => {
    await scenario.stop();
    await proxy.stop();
  });

  it('answers 503 with Retry-After when DynamoDB throttles, without running the handler', async () => {
    const before = test.get(Runs).of('create');
    proxy.mode = 'throttle';
    proxy.operations.length = 0;
    const response = await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': newKey() });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.storeThrottled, status: 503 });
    expect(proxy.operations).toEqual(['UpdateItem', 'UpdateItem', 'UpdateItem']); // the SDK retried, then gave up
    expect(test.get(Runs).of('create')).toBe(before);
  });

  // A claim writes the index of keys in flight; an index short of capacity throttles the table's write, and DynamoDB
  // names the index in the error's ThrottlingReasons (provisioned capacity, or an on-demand table's maximum).
  it.each([
    ['ProvisionedThroughputExceededException', 'IndexWriteProvisionedThroughputExceeded'],
    ['ThrottlingException', 'IndexWriteMaxOnDemandThroughputExceeded'],
  ])(
    'answers 503 with Retry-After when the index of keys in flight throttles the claim (%s, %s), without running the handler',
    async (type, reason) => {
      const { Table } = await scenario.client.send(new DescribeTableCommand({ TableName: scenario.tableName }));
      expect(Table?.GlobalSecondaryIndexes?.map(({ IndexName }) => IndexName)).toEqual(['in_flight']);
      const resource = `${Table?.TableArn}/index/in_flight`;
      const key = newKey();
      const before = test.get(Runs).of('create');
      const records = (await scanTable(scenario.client, scenario.tableName, scenario.layout)).length;
      const logs = new CapturedLogs();
      logs.start();
      proxy.operations.length = 0;
      proxy.failNext = {
        operation: 'UpdateItem',
        count: 1_000,
        type,
        fields: { ThrottlingReasons: [{ reason, resource }] },
      };
      const throttled = await post(`${test.url}/payments`, { amount: 6 }, { 'Idempotency-Key': key }).finally(() =>
        logs.stop(),
      );
      expect(throttled.status).toBe(503);
      expect(throttled.headers.get('retry-after')).toBe('1');
      expect(JSON.parse(throttled.text)).toMatchObject({ type: ProblemType.storeThrottled, status: 503 });
      expect(proxy.operations).toEqual(['UpdateItem', 'UpdateItem', 'UpdateItem']); // the SDK retried, then gave up
      expect(logs.at('error')).toContainEqual(
        expect.objectContaining({ dynamo_error_code: type, throttling_reasons: [`${reason} on ${resource}`] }),
      );
      expect(test.get(Runs).of('create')).toBe(before);
      expect(await scanTable(scenario.client, scenario.tableName, scenario.layout)).toHaveLength(records); // nothing written

      proxy.failNext = undefined; // the index has capacity again: the retry runs the handler once
      const created = await post(`${test.url}/payments`, { amount: 6 }, { 'Idempotency-Key': key });
      expect(created.status).toBe(201);
      expect(test.get(Runs).of('create')).toBe(before + 1);
    },
  );

  it('does not mistake throttling of a duplicate for a replay', async () => {
    const key = newKey();
    const before = test.get(Runs).of('create');
    const first = await post(`${test.url}/payments`, { amount: 2 }, { 'Idempotency-Key': key });
    proxy.mode = 'throttle';
    const throttled = await post(`${test.url}/payments`, { amount: 2 }, { 'Idempotency-Key': key });
    expect(throttled.status).toBe(503);
    expect(throttled.headers.get('idempotent-replayed')).toBeNull();
    proxy.mode = 'pass';
    const replay = await post(`${test.url}/payments`, { amount: 2 }, { 'Idempotency-Key': key });
    expect(replay.text).toBe(first.text);
    expect(test.get(Runs).of('create')).toBe(before + 1);
  });

  // Multi-Region strong consistency tables answer a write racing one in another Region this way.
  it('treats ReplicatedWriteConflictException as contention: claimed again, then 409 in flight, never run or replayed', async () => {
    const key = newKey();
    const before = test.get(Runs).of('create');
    const conflict = { operation: 'UpdateItem', type: 'ReplicatedWriteConflictException' };
    proxy.operations.length = 0;
    proxy.failNext = { ...conflict, count: 1_000 };
    const contended = await post(`${test.url}/payments`, { amount: 4 }, { 'Idempotency-Key': key });
    expect(contended.status).toBe(409);
    expect(JSON.parse(contended.text)).toMatchObject({ type: ProblemType.inFlight });
    expect(contended.headers.get('retry-after')).toBe('1');
    expect(contended.headers.get('idempotent-replayed')).toBeNull();
    expect(proxy.operations).toEqual(Array(9).fill('UpdateItem')); // 3 claims, each retried by the SDK
    expect(test.get(Runs).of('create')).toBe(before);

    proxy.failNext = { ...conflict, count: 1 }; // one conflict, then the claim goes through
    const created = await post(`${test.url}/payments`, { amount: 4 }, { 'Idempotency-Key': key });
    expect(created.status).toBe(201);
    expect(created.headers.get('idempotent-replayed')).toBeNull();
    expect(test.get(Runs).of('create')).toBe(before + 1);
  });

  it('retries a ReplicatedWriteConflictException on the completion like a store fault, and completes', async () => {
    const key = newKey();
    const first = post(`${test.url}/payments`, { amount: 5 }, { 'Idempotency-Key': key });
    proxy.failNext = { operation: 'UpdateItem', count: 4, type: 'ReplicatedWriteConflictException' };
    const created = await first;
    expect(created.status).toBe(201);
    expect(proxy.failNext.count).toBe(0);
    const replay = await post(`${test.url}/payments`, { amount: 5 }, { 'Idempotency-Key': key });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(created.text);
  });

  it('answers 503 store-unavailable when DynamoDB drops connections, without running the handler', async () => {
    const before = test.get(Runs).of('create');
    proxy.mode = 'drop';
    const response = await post(`${test.url}/payments`, { amount: 3 }, { 'Idempotency-Key': newKey() });
    expect(response.status).toBe(503);
    expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.storeUnavailable });
    expect(response.headers.get('retry-after')).toBe('1');
    expect(test.get(Runs).of('create')).toBe(before);
  });
});

describe.each(PLATFORMS)('DynamoDB stopped, on %s', (platform) => {
  it('fails closed with 503 for keys it has not seen completed, and never runs the handler', async () => {
    const { dynamo, test } = await startPaymentsScenario(platform, { module: { replayCache: { enabled: false } } });
    try {
      const key = 'before-the-outage';
      expect((await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': key })).status).toBe(201);
      await dynamo.stop();

      for (const attempt of [key, 'during-the-outage']) {
        const response = await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': attempt });
        expect(response.status).toBe(503);
        expect(JSON.parse(response.text).type).toBe(ProblemType.storeUnavailable);
      }
      expect(test.get(Runs).of('create')).toBe(1);
    } finally {
      await test.close();
    }
  });

  it('keeps replaying completed keys from the replay cache while DynamoDB is down', async () => {
    const { dynamo, test } = await startPaymentsScenario(platform);
    try {
      const first = await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': 'cached' });
      await dynamo.stop();
      const replay = await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': 'cached' });
      expect(replay.status).toBe(201);
      expect(replay.text).toBe(first.text);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect((await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': 'new' })).status).toBe(503);
      expect(test.get(Runs).of('create')).toBe(1);
    } finally {
      await test.close();
    }
  });
});
