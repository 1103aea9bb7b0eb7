import { Controller, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Idempotent, IdempotencyModule, IdempotencyModuleOptions, ProblemType } from 'nestjs-dynamodb-idempotency';
import { configFromEnv } from '../../apps/orders-api/src/config';
import { RESOLVED_IDEMPOTENCY_OPTIONS, resolveOptions } from '../../libs/idempotency/src/options/resolved-options';
import { post, startApp } from '../support/app';
import { countCalls } from '../support/call-counter';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent()
  charge() {
    return { charged: true };
  }
}

/** With `AWS_LAMBDA_FUNCTION_NAME` set (as the Lambda runtime sets it), the defaults fit a frozen, short-lived process. */
describe('defaults on AWS Lambda', () => {
  let dynamo: Dynalite;
  const saved = process.env.AWS_LAMBDA_FUNCTION_NAME;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(() => dynamo.stop());
  afterEach(() => {
    if (saved === undefined) delete process.env.AWS_LAMBDA_FUNCTION_NAME;
    else process.env.AWS_LAMBDA_FUNCTION_NAME = saved;
  });
  const onLambda = () => (process.env.AWS_LAMBDA_FUNCTION_NAME = 'orders-api');
  const offLambda = () => delete process.env.AWS_LAMBDA_FUNCTION_NAME;

  it('keeps a small replay cache (100 entries) on Lambda and 1,000 elsewhere; replayCache.maxEntries overrides both', async () => {
    const entries = async (options: IdempotencyModuleOptions) => {
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ ...options, startupCheck: false, client: localClient(dynamo.endpoint) })],
      }).compile();
      const resolved: ReturnType<typeof resolveOptions> = moduleRef.get(RESOLVED_IDEMPOTENCY_OPTIONS);
      await moduleRef.close();
      return resolved.replayCacheEntries;
    };
    offLambda();
    expect(await entries({})).toBe(1000);
    onLambda();
    expect(await entries({})).toBe(100);
    expect(await entries({ replayCache: { maxEntries: 500 } })).toBe(500);
    expect(await entries({ replayCache: { enabled: false } })).toBe(0);
  });

  it('checks the table once per cold start by default; startupCheck: false makes no DynamoDB call before the first request, whose table reads run beside each other', async () => {
    onLambda();
    const tableName = uniqueTableName('lambda-startup');
    const client = localClient(dynamo.endpoint);
    await createIdempotencyTable(client, tableName);
    const calls = countCalls(client);

    const checked = await startApp('express', {
      imports: [IdempotencyModule.forRoot({ client, tableName })],
      controllers: [ChargesController],
    });
    expect(calls.counts.DescribeTable).toBe(1);
    await checked.close();

    calls.reset();
    const unchecked = await startApp('express', {
      imports: [IdempotencyModule.forRoot({ client, tableName, startupCheck: false })],
      controllers: [ChargesController],
    });
    try {
      expect(calls.total()).toBe(0);
      expect((await post(`${unchecked.url}/charges`, {}, { 'idempotency-key': 'lambda-1' })).status).toBe(201);
      // The first call asks whether commitWith works: the transactions' probe, and the table's mode (an MRSC global
      // table has no transactions), sent together.
      expect(calls.counts).toMatchObject({ DescribeTable: 1, TransactWriteItems: 1 });
      expect((await post(`${unchecked.url}/charges`, {}, { 'idempotency-key': 'lambda-2' })).status).toBe(201);
      expect(calls.counts).toMatchObject({ DescribeTable: 1, TransactWriteItems: 1 });
    } finally {
      await unchecked.close();
    }
  });

  it('with startupCheck: false a missing table starts, and shows on the first request as 500 store-misconfigured', async () => {
    const app = await startApp('express', {
      imports: [
        IdempotencyModule.forRoot({
          client: localClient(dynamo.endpoint),
          tableName: uniqueTableName('lambda-missing'),
          startupCheck: false,
        }),
      ],
      controllers: [ChargesController],
    });
    try {
      const response = await post(`${app.url}/charges`, {}, { 'idempotency-key': 'lambda-missing-1' });
      expect(response.status).toBe(500);
      expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.storeMisconfigured });
    } finally {
      await app.close();
    }
  });

  it('warns that an in-process reconciler sweeps only while an invocation runs', async () => {
    onLambda();
    const logs = new CapturedLogs();
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          client: localClient(dynamo.endpoint),
          tableName: uniqueTableName('lambda-reconciler'),
          startupCheck: false,
          reconcileIntervalSeconds: 60,
        }),
      ],
    }).compile();
    logs.start();
    try {
      await moduleRef.init();
      expect(logs.at('warn')).toContainEqual(
        expect.objectContaining({ msg: expect.stringMatching(/^reconcileIntervalSeconds on AWS Lambda/) }),
      );
    } finally {
      logs.stop();
      await moduleRef.close();
    }
  });

  it('runs no reconciler in the demo on Lambda unless RECONCILE_INTERVAL_SECONDS says so', () => {
    expect(configFromEnv({}).reconcileIntervalSeconds).toBe(60);
    expect(configFromEnv({ AWS_LAMBDA_FUNCTION_NAME: 'orders-api' }).reconcileIntervalSeconds).toBeUndefined();
    expect(
      configFromEnv({ AWS_LAMBDA_FUNCTION_NAME: 'orders-api', RECONCILE_INTERVAL_SECONDS: '30' })
        .reconcileIntervalSeconds,
    ).toBe(30);
  });
});
