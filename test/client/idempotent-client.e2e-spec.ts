import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Body, Controller, Post, Req } from '@nestjs/common';
import {
  Idempotent,
  IdempotencyContext,
  IdempotencyModule,
  IdempotencyService,
  ProblemType,
} from 'nestjs-dynamodb-idempotency';
import { createIdempotentClient, IdempotentRequestError } from 'nestjs-dynamodb-idempotency/client';
import { startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { RunsByKey } from '../support/runs-by-key';
import { createIdempotencyTable } from '../support/table';

/** A server that answers each request with the next scripted reply, and remembers the keys it was sent. */
class ScriptedServer {
  readonly keys: (string | undefined)[] = [];
  private replies: ((request: IncomingMessage, response: ServerResponse) => void)[] = [];
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      this.keys.push(request.headers['idempotency-key'] as string | undefined);
      request.resume().on('end', () => (this.replies.shift() ?? reply(201, { ok: true }))(request, response));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  script(...replies: ((request: IncomingMessage, response: ServerResponse) => void)[]): void {
    this.keys.length = 0;
    this.replies = replies;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const reply =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (_request: IncomingMessage, response: ServerResponse) => {
    const type = status >= 400 ? 'application/problem+json' : 'application/json';
    response.writeHead(status, { 'content-type': type, ...headers }).end(JSON.stringify(body));
  };
const reset = (request: IncomingMessage) => request.socket.destroy();

describe('the retrying client against scripted answers', () => {
  const server = new ScriptedServer();
  beforeAll(() => server.start());
  afterAll(() => server.stop());
  const client = () => createIdempotentClient({ baseUrl: server.url, maxAttempts: 4, maxElapsedMs: 5000 });

  it('sends one key per logical call, the same on every retry: 503, 429, then 201', async () => {
    server.script(
      reply(503, { type: ProblemType.storeUnavailable }, { 'retry-after': '0' }),
      reply(429, { title: 'slow down' }, { 'retry-after': '0' }),
      reply(201, { id: 'ord_1' }),
    );
    const answer = await client().request('POST', '/orders', { body: { item: 'book' } });
    expect(answer).toMatchObject({ status: 201, body: { id: 'ord_1' }, attempts: 3, replayed: false });
    expect(server.keys).toEqual([answer.key, answer.key, answer.key]);
    expect(answer.key).toMatch(/^[0-9a-f-]{36}$/);
    const next = await client().request('POST', '/orders', { body: { item: 'book' } });
    expect(next.key).not.toBe(answer.key); // a new logical call, a new key
  });

  it('retries a connection reset with the same key, and uses the key it is given', async () => {
    server.script(reset, reply(201, { id: 'ord_2' }));
    const answer = await client().request('POST', '/orders', { key: 'order-2', body: { item: 'pen' } });
    expect(answer).toMatchObject({ status: 201, attempts: 2, key: 'order-2' });
    expect(server.keys).toEqual(['order-2', 'order-2']);
  });

  it.each([
    [400, {}],
    [401, {}],
    [403, {}],
    [404, {}],
    [422, { type: ProblemType.fingerprintMismatch }],
    [409, { type: ProblemType.commitRejected }],
  ])('never retries a %i (%j)', async (status, body) => {
    server.script(reply(status, body), reply(201, { id: 'never' }));
    const answer = await client().request('POST', '/orders', { body: {} });
    expect(answer).toMatchObject({ status, attempts: 1 });
    expect(server.keys).toHaveLength(1);
  });

  it('retries a 409 in flight (the module’s problem type) without Retry-After, with backoff', async () => {
    server.script(
      reply(409, { type: ProblemType.inFlight }),
      reply(201, { id: 'ord_3' }, { 'idempotent-replayed': 'true' }),
    );
    const answer = await client().request('POST', '/orders', { body: {} });
    expect(answer).toMatchObject({ status: 201, attempts: 2, replayed: true });
  });

  it('returns the last answer when maxAttempts runs out, and stops at maxElapsedMs', async () => {
    const unavailable = reply(503, { type: ProblemType.storeUnavailable }, { 'retry-after': '0' });
    server.script(unavailable, unavailable, unavailable, unavailable, unavailable);
    expect(await client().request('POST', '/orders', { body: {} })).toMatchObject({ status: 503, attempts: 4 });
    server.script(reply(503, {}, { 'retry-after': '60' }), reply(201, {}));
    const started = performance.now();
    expect(await client().request('POST', '/orders', { body: {} })).toMatchObject({ status: 503, attempts: 1 });
    expect(performance.now() - started).toBeLessThan(5000); // a 60 s wait would pass maxElapsedMs: not waited
  });

  it('throws the last network error when every attempt fails, and aborts on its signal', async () => {
    const closed = createIdempotentClient({ baseUrl: 'http://127.0.0.1:9', maxAttempts: 2, maxElapsedMs: 5000 });
    const failure = await closed.request('POST', '/orders', { key: 'unreachable' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(IdempotentRequestError);
    expect(failure).toMatchObject({ attempts: 2, key: 'unreachable' });
    expect(String((failure as Error).cause)).toMatch(/fetch failed/); // the last network error
    server.script(reply(503, {}, { 'retry-after': '2' }));
    const controller = new AbortController();
    const call = client().request('POST', '/orders', { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('the user left')), 200);
    await expect(call).rejects.toThrow('the user left');
  });

  it('bounds an attempt by maxElapsedMs: a server that answers after 4 s does not hold a 1 s call', async () => {
    const slow = (_request: IncomingMessage, response: ServerResponse) => {
      const timer = setTimeout(() => reply(201, { late: true })(_request, response), 4000);
      response.on('close', () => clearTimeout(timer));
    };
    server.script(slow);
    const bounded = createIdempotentClient({ baseUrl: server.url, maxElapsedMs: 1000 });
    const started = performance.now();
    const failure = await bounded.request('POST', '/orders', { key: 'slow-1' }).catch((error: unknown) => error);
    const took = performance.now() - started;
    expect(failure).toBeInstanceOf(IdempotentRequestError);
    expect(failure).toMatchObject({ attempts: 1, key: 'slow-1' });
    expect(String((failure as Error).cause)).toMatch(/TimeoutError|timeout|aborted/i);
    expect(took).toBeGreaterThanOrEqual(900);
    expect(took).toBeLessThan(3000);
  });

  it('retries an answer cut off mid-body with the same key, as a reset', async () => {
    const cut = (_request: IncomingMessage, response: ServerResponse) => {
      response.writeHead(201, { 'content-type': 'application/json', 'content-length': '100' });
      response.write('{"id":"ord_');
      setTimeout(() => response.socket?.destroy(), 20);
    };
    server.script(cut, reply(201, { id: 'ord_4' }, { 'idempotent-replayed': 'true' }));
    const answer = await client().request('POST', '/orders', { key: 'cut-1', body: {} });
    expect(answer).toMatchObject({ status: 201, attempts: 2, body: { id: 'ord_4' }, replayed: true });
    expect(server.keys).toEqual(['cut-1', 'cut-1']);
  });

  it('refuses a stream body before anything is sent: a retry could not send it again', async () => {
    server.script();
    const { Readable } = await import('node:stream');
    for (const body of [Readable.from(['{"a":1}']), new ReadableStream()]) {
      await expect(client().request('POST', '/orders', { body })).rejects.toThrow(
        'IdempotentClient: a stream body cannot be sent again on a retry',
      );
    }
    expect(server.keys).toEqual([]);
  });

  it('refuses a name outside a protected call, saying to pass a key', async () => {
    await expect(client().request('POST', '/orders', { name: 'charge' })).rejects.toThrow(
      /none runs here. Pass \{ key \}/,
    );
  });
});

@Controller('downstream')
class DownstreamController {
  constructor(private readonly runs: RunsByKey) {}

  @Post('charges')
  @Idempotent()
  async charge(@Body() body: { amount: number; delayMs?: number }, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    if (body.delayMs) await new Promise((resolve) => setTimeout(resolve, body.delayMs));
    return { charged: body.amount };
  }
}

/** Against the module itself (dynalite, replay cache off): a duplicate in flight, and keys carried downstream. */
describe('the retrying client against the module', () => {
  let dynamo: Dynalite;
  let dynamoClient: DynamoDBClient;
  let app: TestApp;
  beforeAll(async () => {
    dynamo = await startDynalite();
    dynamoClient = localClient(dynamo.endpoint);
    const tableName = uniqueTableName('client');
    await createIdempotencyTable(dynamoClient, tableName);
    app = await startApp(
      'express',
      {
        imports: [
          IdempotencyModule.forRoot({
            client: dynamoClient,
            tableName,
            replayCache: { enabled: false },
            retryAfterSeconds: 1,
          }),
        ],
        controllers: [DownstreamController],
        // Injecting IdempotencyContext turns call tracking on: the client finds the protected call it runs in.
        providers: [
          RunsByKey,
          { provide: 'tracks calls', inject: [IdempotencyContext], useFactory: (context: unknown) => context },
        ],
      },
      { realTime: true },
    );
  });
  afterAll(async () => {
    await app.close();
    await dynamo.stop();
  });

  it('waits out a 409 in flight (Retry-After) and gets the replay, with the same key, the handler run once', async () => {
    const client = createIdempotentClient({ baseUrl: app.url, maxElapsedMs: 10_000 });
    const key = `client-in-flight-${Date.now()}`;
    const first = client.request('POST', '/downstream/charges', { key, body: { amount: 5, delayMs: 600 } });
    await new Promise((resolve) => setTimeout(resolve, 150));
    const retry = await client.request('POST', '/downstream/charges', { key, body: { amount: 5, delayMs: 600 } });
    expect((await first).status).toBe(201);
    expect(retry).toMatchObject({ status: 201, replayed: true, body: { charged: 5 }, key });
    expect(retry.attempts).toBeGreaterThan(1);
    expect(RunsByKey.of(key)).toBe(1);
  });

  it('does not retry a 422: another request under the key', async () => {
    const client = createIdempotentClient({ baseUrl: app.url });
    const key = `client-mismatch-${Date.now()}`;
    await client.request('POST', '/downstream/charges', { key, body: { amount: 1 } });
    const other = await client.request('POST', '/downstream/charges', { key, body: { amount: 2 } });
    expect(other).toMatchObject({ status: 422, attempts: 1, body: { type: ProblemType.fingerprintMismatch } });
  });

  it('inside a protected call, { name } is the call’s deriveKey(name): every run of the parent sends the same key', async () => {
    const service = app.get(IdempotencyService);
    const client = createIdempotentClient({ baseUrl: app.url });
    const sent: string[] = [];
    const parent = (key: string) =>
      service.execute({ operation: 'checkout', key }, async (context) => {
        const charge = await client.request('POST', '/downstream/charges', { name: 'charge', body: { amount: 9 } });
        sent.push(charge.key);
        expect(charge.key).toBe(context.deriveKey('charge'));
        if (sent.length === 1) throw new Error('the parent fails after the charge: not final, it runs again');
        return charge.body;
      });
    const key = `parent-${Date.now()}`;
    await expect(parent(key)).rejects.toThrow('the parent fails');
    await expect(parent(key)).resolves.toEqual({ charged: 9 });
    expect(sent[0]).toBe(sent[1]);
    expect(RunsByKey.of(sent[0])).toBe(1); // the downstream charged once; the second run got its replay
  });
});
