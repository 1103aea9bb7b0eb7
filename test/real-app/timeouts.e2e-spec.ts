import { connect } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Controller, Headers, HttpCode, Post, Res, UseInterceptors } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { Platform, PLATFORMS, post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';
import { timeoutInterceptor } from '../support/timeout-interceptor';
import { Gates } from './gates';
import { untilStatus } from './records';

/**
 * The outcome stored is the handler's own, whoever answered the client first: a timeout in front of the handler (the
 * interceptor from Nest's docs, globally, on the controller, on the method on either side of @Idempotent()), or a
 * client that closed its socket. Two instances on one table, replay cache off: the 409 and the replay come from
 * DynamoDB. Every handler waits at a gate the test opens once the client has been answered.
 */

/**
 * Nest's documented TimeoutInterceptor, at 500 ms: the first request's handler waits at its gate past it, while a
 * replay (a refused claim and a read of dynalite) must come well within it, also on a loaded machine (at 100 ms, one
 * did not: 408 to a replay).
 */
const TimeoutInterceptor = timeoutInterceptor(500);

@Controller('method')
class MethodController {
  constructor(private readonly gates: Gates) {}

  @Post('outside')
  @Idempotent()
  @UseInterceptors(TimeoutInterceptor) // applied first: [Timeout, Idempotency], the timeout runs outside
  @HttpCode(202)
  async outside(@Headers('idempotency-key') key: string) {
    return { charged: key, run: await this.gates.pass(key) };
  }

  @Post('inside')
  @UseInterceptors(TimeoutInterceptor) // applied last: [Idempotency, Timeout], the timeout runs inside
  @Idempotent()
  @HttpCode(202)
  async inside(@Headers('idempotency-key') key: string) {
    return { charged: key, run: await this.gates.pass(key) };
  }

  @Post('passthrough')
  @UseInterceptors(TimeoutInterceptor)
  @Idempotent()
  async passthrough(@Headers('idempotency-key') key: string, @Res({ passthrough: true }) response: any) {
    response.status(203);
    response.header('location', `/charges/${key}`);
    return { charged: key, run: await this.gates.pass(key) };
  }

  @Post('plain')
  @Idempotent()
  async plain(@Headers('idempotency-key') key: string) {
    return { charged: key, run: await this.gates.pass(key) };
  }
}

@Controller('controller')
@UseInterceptors(TimeoutInterceptor)
class ControllerTimeoutController {
  constructor(private readonly gates: Gates) {}

  @Post()
  @Idempotent()
  async charge(@Headers('idempotency-key') key: string) {
    return { charged: key, run: await this.gates.pass(key) };
  }
}

/** Sends a POST on a raw socket and closes it once the handler runs: the client is gone before any answer. */
async function abortMidHandler(url: string, path: string, key: string): Promise<void> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const body = '{"amount":1}';
  socket.write(
    `POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\nIdempotency-Key: ${key}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n${body}`,
  );
  await Gates.reached(key);
  socket.destroy();
}

describe.each(PLATFORMS)('the stored outcome is the handler’s own, on %s', (platform: Platform) => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let tableName: string;
  let a: TestApp;
  let b: TestApp;
  let globalA: TestApp;
  let globalB: TestApp;
  let keys = 0;
  const newKey = () => `timeout-${platform}-${++keys}`;
  const logs = new CapturedLogs();

  const boot = (global: boolean) =>
    startApp(
      platform,
      {
        imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false } })],
        controllers: global ? [MethodController] : [MethodController, ControllerTimeoutController],
        providers: [Gates, TimeoutInterceptor],
      },
      { configure: global ? (app) => app.useGlobalInterceptors(new TimeoutInterceptor()) : undefined },
    );

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    tableName = uniqueTableName('timeouts');
    await createIdempotencyTable(client, tableName);
    [a, b, globalA, globalB] = [await boot(false), await boot(false), await boot(true), await boot(true)];
    logs.start();
  });
  afterAll(async () => {
    logs.stop();
    await Promise.all([a, b, globalA, globalB].map((app) => app.close()));
    await dynamo.stop();
  });

  /**
   * The first request is answered early (408, or never for a closed socket) while its handler still waits at the gate;
   * a duplicate on the other instance meanwhile gets 409; once the handler finishes, its own result is COMPLETED and
   * every retry replays it; it ran once.
   */
  async function answeredEarly(
    [first, second]: [TestApp, TestApp],
    path: string,
    expected: { status: number; location?: (key: string) => string },
    send: (key: string) => Promise<number | undefined>,
  ) {
    const key = newKey();
    logs.clear();
    const early = await send(key);
    if (early !== undefined) expect(early).toBe(408);

    const duplicate = await post(`${second.url}${path}`, { amount: 1 }, { 'Idempotency-Key': key });
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers.get('retry-after')).toBe('1');
    expect(Gates.runsOf(key)).toBe(1);

    Gates.release(key);
    const record = await untilStatus(client, tableName, `POST ${path}`, key, 'COMPLETED');
    expect(record.response).toMatchObject({ statusCode: expected.status, body: { charged: key, run: 1 } });

    for (const app of [second, first]) {
      const retry = await post(`${app.url}${path}`, { amount: 1 }, { 'Idempotency-Key': key });
      expect(retry.status).toBe(expected.status);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(JSON.parse(retry.text)).toEqual({ charged: key, run: 1 });
      if (expected.location) expect(retry.headers.get('location')).toBe(expected.location(key));
    }
    expect(Gates.runsOf(key)).toBe(1);
    const warnings = logs
      .at('warn')
      .filter((entry) => JSON.stringify(entry).includes('answered before the handler finished'));
    expect(warnings).toHaveLength(1);
  }

  /** The first request through `app`, awaited until its answer: its status. */
  const timedOut = (app: TestApp, path: string) => async (key: string) => {
    const response = post(`${app.url}${path}`, { amount: 1 }, { 'Idempotency-Key': key });
    await Gates.reached(key);
    return (await response).status;
  };

  it('with the TimeoutInterceptor registered globally', async () => {
    await answeredEarly([globalA, globalB], '/method/plain', { status: 201 }, timedOut(globalA, '/method/plain'));
  });

  it('with the TimeoutInterceptor on the controller', async () => {
    await answeredEarly([a, b], '/controller', { status: 201 }, timedOut(a, '/controller'));
  });

  it('with the TimeoutInterceptor on the method, outside @Idempotent()', async () => {
    await answeredEarly([a, b], '/method/outside', { status: 202 }, timedOut(a, '/method/outside'));
  });

  it('with the TimeoutInterceptor on the method, inside @Idempotent()', async () => {
    await answeredEarly([a, b], '/method/inside', { status: 202 }, timedOut(a, '/method/inside'));
  });

  it('keeps the status and headers the handler set through @Res({ passthrough: true }), not the 408', async () => {
    const path = '/method/passthrough';
    await answeredEarly([a, b], path, { status: 203, location: (key) => `/charges/${key}` }, timedOut(a, path));
  });

  it('when the client closes its socket while the handler runs', async () => {
    await answeredEarly([a, b], '/method/plain', { status: 201 }, async (key) => {
      await abortMidHandler(a.url, '/method/plain', key);
      return undefined;
    });
  });
});
