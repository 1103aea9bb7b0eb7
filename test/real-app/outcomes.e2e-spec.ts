import { request } from 'node:http';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Body, Controller, HttpException, Post, Req, UnauthorizedException } from '@nestjs/common';
import { Idempotent, IdempotencyModule, ProblemType } from 'nestjs-dynamodb-idempotency';
import { Platform, PLATFORMS, post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { CapturedLogs } from '../support/logs';
import { RunsByKey } from '../support/runs-by-key';
import { createIdempotencyTable } from '../support/table';
import { metricValue, registerTestTelemetry } from '../support/telemetry';

/**
 * Outcomes that should not be final, and faults that are not transient: 401 and 407 are retryable by default; a store
 * error that retrying will not fix is a 500 store-misconfigured without Retry-After; a scope or key function that
 * throws is a problem response, logged with the route. Replay cache off.
 */
const telemetry = registerTestTelemetry();

@Controller('charges')
class ChargesController {
  constructor(private readonly runs: RunsByKey) {}

  @Post()
  @Idempotent()
  charge(@Body() body: { outcome?: number }, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    if (body.outcome === 401) throw new UnauthorizedException('token expired');
    if (body.outcome === 407) throw new HttpException('Proxy Authentication Required', 407);
    if (body.outcome === 403) throw new HttpException('Forbidden', 403);
    return { charged: true };
  }

  @Post('scoped')
  @Idempotent({ scope: (_context, request) => request.headers['x-tenant'].toLowerCase() })
  scoped(@Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { scoped: true };
  }

  @Post('keyed')
  @Idempotent({ key: (request) => request.body.order.id })
  keyed(@Req() request: any) {
    this.runs.count(`keyed-${JSON.stringify(request.body)}`);
    return { keyed: true };
  }
}

/** A POST through node:http: fetch refuses to hand back a 407 (it takes it as its own proxy's challenge). */
function postStatus(url: string, body: unknown, key: string): Promise<{ status: number; replayed?: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      url,
      { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key } },
      (response) => {
        response
          .resume()
          .on('end', () =>
            resolve({ status: response.statusCode!, replayed: response.headers['idempotent-replayed'] as string }),
          );
      },
    );
    outgoing.on('error', reject).end(JSON.stringify(body));
  });
}

describe.each(PLATFORMS)('outcomes and faults on %s', (platform: Platform) => {
  let dynamo: Dynalite;
  let proxy: FaultProxy;
  let client: DynamoDBClient;
  let tableName: string;
  let app: TestApp;
  let keys = 0;
  const newKey = () => `outcomes-${platform}-${++keys}`;
  const logs = new CapturedLogs();

  const boot = (table: string, endpoint = proxy.endpoint) =>
    startApp(platform, {
      imports: [
        IdempotencyModule.forRoot({
          client: localClient(endpoint),
          tableName: table,
          replayCache: { enabled: false },
          failOnStartup: false,
        }),
      ],
      controllers: [ChargesController],
      providers: [RunsByKey],
    });

  beforeAll(async () => {
    dynamo = await startDynalite();
    proxy = await startFaultProxy(dynamo.endpoint);
    client = localClient(dynamo.endpoint);
    tableName = uniqueTableName('outcomes');
    await createIdempotencyTable(client, tableName);
    app = await boot(tableName);
    logs.start();
  });
  afterEach(() => {
    proxy.failNext = undefined;
    logs.clear();
  });
  afterAll(async () => {
    logs.stop();
    await app.close();
    await proxy.stop();
    await dynamo.stop();
  });

  it.each([401, 407])(
    'a %i is not final: the client may retry with the same key after refreshing its credentials',
    async (status) => {
      const key = newKey();
      expect(await postStatus(`${app.url}/charges`, { outcome: status }, key)).toEqual({ status });
      expect(await postStatus(`${app.url}/charges`, { outcome: status }, key)).toEqual({ status }); // not a replay
      expect(RunsByKey.of(key)).toBe(2);
    },
  );

  it('a 403 stays final (the rest of defaultStoreIf)', async () => {
    const key = newKey();
    await post(`${app.url}/charges`, { outcome: 403 }, { 'Idempotency-Key': key });
    const replay = await post(`${app.url}/charges`, { outcome: 403 }, { 'Idempotency-Key': key });
    expect(replay.status).toBe(403);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(RunsByKey.of(key)).toBe(1);
  });

  async function expectMisconfigured(response: Awaited<ReturnType<typeof post>>, code: string) {
    expect(response.status).toBe(500);
    expect(response.headers.get('retry-after')).toBeNull();
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.storeMisconfigured, status: 500 });
    const errors = logs.at('error').map((entry) => JSON.stringify(entry));
    expect(errors.some((entry) => entry.includes(code) && entry.includes('"fix"'))).toBe(true);
  }

  it.each(['AccessDeniedException', 'ValidationException', 'UnrecognizedClientException'])(
    '%s on the claim: 500 store-misconfigured without Retry-After, logged with the fix, counted apart; the handler does not run',
    async (type) => {
      const key = newKey();
      const before = metricValue(await telemetry.scrape(), 'idempotency_requests_total', {
        outcome: 'store_misconfigured',
      });
      proxy.failNext = { operation: 'UpdateItem', count: 1, type };
      await expectMisconfigured(await post(`${app.url}/charges`, {}, { 'Idempotency-Key': key }), type);
      expect(proxy.failNext.count).toBe(0); // not retried: retrying will not help
      expect(RunsByKey.of(key)).toBe(0);
      expect(
        metricValue(await telemetry.scrape(), 'idempotency_requests_total', { outcome: 'store_misconfigured' }),
      ).toBe(before + 1);
    },
  );

  it('a table that does not exist (failOnStartup: false): 500 store-misconfigured naming the fix in the log', async () => {
    const missing = await boot('no_such_table', dynamo.endpoint);
    try {
      logs.start();
      const key = newKey();
      await expectMisconfigured(
        await post(`${missing.url}/charges`, {}, { 'Idempotency-Key': key }),
        'ResourceNotFoundException',
      );
      expect(
        logs
          .at('error')
          .map((entry) => JSON.stringify(entry))
          .join(),
      ).toMatch(/table:create/);
      expect(RunsByKey.of(key)).toBe(0);
    } finally {
      await missing.close();
    }
  });

  it('throttling stays a 503 with Retry-After', async () => {
    proxy.failNext = { operation: 'UpdateItem', count: 3, type: 'ThrottlingException' };
    const response = await post(`${app.url}/charges`, {}, { 'Idempotency-Key': newKey() });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
  });

  it('a scope function that throws: 500 scope-failed, logged with the route, the handler does not run', async () => {
    const key = newKey();
    const response = await post(`${app.url}/charges/scoped`, {}, { 'Idempotency-Key': key }); // no x-tenant header
    expect(response.status).toBe(500);
    expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.scopeFailed, status: 500 });
    expect(RunsByKey.of(key)).toBe(0);
    expect(
      logs
        .at('error')
        .map((entry) => JSON.stringify(entry))
        .join(),
    ).toMatch(/POST \/charges\/scoped/);
    const scoped = await post(`${app.url}/charges/scoped`, {}, { 'Idempotency-Key': key, 'x-tenant': 'ACME' });
    expect(scoped.status).toBe(201);
  });

  it('a key function that throws: 400 key-invalid, logged with the route, the handler does not run', async () => {
    const response = await post(`${app.url}/charges/keyed`, { amount: 1 });
    expect(response.status).toBe(400);
    expect(JSON.parse(response.text)).toMatchObject({ type: ProblemType.keyInvalid });
    expect(RunsByKey.of('keyed-{"amount":1}')).toBe(0);
    expect(
      logs
        .at('warn')
        .map((entry) => JSON.stringify(entry))
        .join(),
    ).toMatch(/POST \/charges\/keyed/);
  });
});
