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
