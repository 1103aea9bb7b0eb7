import { Body, Controller, Post } from '@nestjs/common';
import {
  IdempotencyContext,
  IdempotencyProblemException,
  IdempotencyStoreThrottledError,
  Idempotent,
  IdempotencyModule,
  ProblemType,
} from 'nestjs-dynamodb-idempotency';
import { post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';

let proxy: FaultProxy;
const charged: string[] = [];

@Controller('payments')
class PaymentsController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  /** Charges in a step; `failStepWrite`: the store refuses the step's write, once the charge was made. */
  @Post()
  @Idempotent()
  async pay(@Body() body: { id: string; failStepWrite?: boolean }) {
    await this.idempotency.step('charge', () => {
      charged.push(body.id);
      if (body.failStepWrite) proxy.failNext = { operation: 'UpdateItem', count: 1, type: 'AccessDeniedException' };
      return { chargeId: `ch-${body.id}` };
    });
    return { paid: body.id };
  }
}

/**
 * A store fault after a step ran: the provider was charged, so the problem must not say "not processed". Through
 * HTTP, on dynalite behind a proxy that refuses the step's write.
 */
describe('a store fault once the owned run has started', () => {
  let dynamo: Dynalite;
  let app: TestApp;
  beforeAll(async () => {
    dynamo = await startDynalite();
    proxy = await startFaultProxy(dynamo.endpoint);
    const tableName = uniqueTableName('stepfaults');
    await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
    app = await startApp('express', {
      imports: [
        IdempotencyModule.forRoot({
          client: localClient(proxy.endpoint),
          tableName,
          replayCache: { enabled: false },
          startupCheck: false,
        }),
      ],
      controllers: [PaymentsController],
    });
  });
  afterAll(async () => {
    await app.close();
    await proxy.stop();
    await dynamo.stop();
  });

  it('says the request may have been partly processed, and to retry with the same key', async () => {
    const logs = new CapturedLogs();
    logs.start();
    const id = `fault-${Date.now()}`;
    try {
      const failed = await post(`${app.url}/payments`, { id, failStepWrite: true }, { 'Idempotency-Key': id });
      expect(failed.status).toBe(500);
      const problem = JSON.parse(failed.text);
      expect(problem).toMatchObject({ type: ProblemType.storeMisconfigured });
      expect(problem.detail).toContain('may have been partly processed');
      expect(problem.detail).toContain('Retry with the same key');
      expect(problem.detail).not.toContain('not processed');
    } finally {
      logs.stop();
    }
    expect(charged.filter((charge) => charge === id)).toEqual([id]);
    // A request whose store fault came before any work still says "not processed".
    const fresh = `${id}-fresh`;
    proxy.failNext = { operation: 'UpdateItem', count: 1, type: 'AccessDeniedException' }; // the claim itself
    const before = await post(`${app.url}/payments`, { id: fresh }, { 'Idempotency-Key': fresh });
    expect(JSON.parse(before.text).detail).toContain('was not processed');
    expect(charged.filter((charge) => charge === fresh)).toEqual([]);
  });

  it('words every store problem that way once work started, and only then', () => {
    const error = new IdempotencyStoreThrottledError('step', 'ThrottlingException');
    expect(IdempotencyProblemException.from(error).problem.detail).toContain('was not processed');
    error.workStarted = true;
    const started = IdempotencyProblemException.from(error);
    expect(started.problem.detail).toContain('may have been partly processed');
    expect(started.headers).toEqual({ 'Retry-After': '1' });
  });
});

@Controller('sealed')
class SealedController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  /** A step, then a 500 (not final) on the first run: the retry resumes the step from its sealed record. */
  @Post()
  @Idempotent()
  async pay(@Body() body: { id: string }) {
    const charge = await this.idempotency.step('charge', () => (charged.push(body.id), { chargeId: `ch-${body.id}` }));
    if (charged.filter((id) => id === body.id).length === 1 && !resumed.has(body.id)) {
      resumed.add(body.id);
      throw new Error('the receipt printer jammed');
    }
    return charge;
  }
}
const resumed = new Set<string>();

/** A step sealed with a key another instance lacks: the module's record-unreadable problem, never Nest's bare 500. */
describe('a recorded step this instance cannot open', () => {
  let dynamo: Dynalite;
  const apps: TestApp[] = [];
  beforeAll(() => startDynalite().then((started) => (dynamo = started)));
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await dynamo.stop();
  });

  it('answers 500 record-unreadable as problem+json, and never runs the step again', async () => {
    const tableName = uniqueTableName('sealedsteps');
    await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
    const boot = async (key: Buffer) => {
      const app = await startApp('express', {
        imports: [
          IdempotencyModule.forRoot({
            client: localClient(dynamo.endpoint),
            tableName,
            replayCache: { enabled: false },
            encryption: { keys: [key] },
          }),
        ],
        controllers: [SealedController],
      });
      apps.push(app);
      return app;
    };
    const [sealing, other] = [await boot(Buffer.alloc(32, 1)), await boot(Buffer.alloc(32, 2))];
    const id = `sealed-${Date.now()}`;
    const first = await post(`${sealing.url}/sealed`, { id }, { 'Idempotency-Key': id });
    expect(first.status).toBe(500);
    const logs = new CapturedLogs();
    logs.start();
    try {
      const unreadable = await post(`${other.url}/sealed`, { id }, { 'Idempotency-Key': id });
      expect(unreadable.status).toBe(500);
      expect(unreadable.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(unreadable.text)).toMatchObject({ type: ProblemType.recordUnreadable, status: 500 });
      expect(JSON.stringify(logs.at('error'))).toContain('recorded step unreadable');
    } finally {
      logs.stop();
    }
    expect(charged.filter((charge) => charge === id)).toEqual([id]);
  });
});
