import { setTimeout as sleep } from 'node:timers/promises';
import { LambdaContainer } from '../lambda/containers';
import { pathEvent } from '../lambda/invocations';
import { DemoProcess, startDemoProcess } from '../support/demo-process';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { providerSince, Purchase, tablesWithoutTtl } from './purchase-processes';

/**
 * A purchase (two steps) whose Lambda invocation timed out after its first step, on DynamoDB Local: the container is
 * frozen, its lease ended at the invocation's deadline, and a retry in another container resumes after the recorded
 * charge. Thawed, the first container runs no further step (its own clock says its lease is over).
 */
describeOnDynamoDbLocal('steps and the Lambda deadline on DynamoDB Local', () => {
  let provider: DemoProcess;
  let first: LambdaContainer;
  let second: LambdaContainer;

  beforeAll(async () => {
    const { endpoint } = await startStore('dynamodb-local');
    const tables = await tablesWithoutTtl(endpoint);
    provider = await startDemoProcess({ DYNAMODB_ENDPOINT: endpoint, ...tables });
    const env = {
      DYNAMODB_ENDPOINT: endpoint,
      ...tables,
      AWS_LAMBDA_FUNCTION_NAME: 'orders-api',
      PAYMENTS_URL: provider.url,
    };
    [first, second] = await Promise.all([
      LambdaContainer.start({ ...env, PURCHASE_PAUSE: 'after-charge:8000' }),
      LambdaContainer.start(env),
    ]);
    // Warm both (the app is created at a container's first invocation).
    await Promise.all(
      [first, second].map((container, i) =>
        container.invoke(pathEvent('api-gateway-v2', `warm-steps-${i}`, '/orders/none/receipts')),
      ),
    );
  }, 90_000);
  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop(), provider?.kill()]);
  });

  it('timed out after step 1: the retry resumes after the deadline; the thawed container runs no step', async () => {
    const key = `lambda-steps-${Date.now()}`;
    const purchase = pathEvent('api-gateway-v2', key, '/purchases', { item: 'book', amount: 1250 });
    const since = await providerSince(provider);
    // 4.5 s left: the charge runs (a step starts only while the lease, cut at the deadline, has more than the 2 s
    // clock-skew margin left), then the handler pauses 8 s; the invocation times out and the container is frozen.
    expect(await first.invoke(purchase, 4500)).toEqual({ timedOut: true });
    expect((await since()).charges).toHaveLength(1);

    let answer: { statusCode: number; body: string } | undefined;
    for (const deadline = Date.now() + 15_000; !answer && Date.now() < deadline; await sleep(250)) {
      const attempt = await second.invoke(purchase);
      if (attempt.timedOut) throw new Error('the retry timed out');
      if (attempt.response.statusCode !== 409) answer = attempt.response;
    }
    expect(answer?.statusCode).toBe(201);
    const { charges, receipts } = await since();
    expect(charges).toHaveLength(1);
    expect(receipts).toHaveLength(1);
    expect(JSON.parse(answer!.body) as Purchase).toMatchObject({
      chargeId: charges[0].chargeId,
      chargedAt: charges[0].chargedAt,
      chargedBy: first.pid,
      receiptId: receipts[0].receiptId,
      ranHere: ['receipt#2'], // the frozen run may have started it, for all the store knows
    });

    const late = first.lateReply();
    first.thaw();
    expect((await late).result).toMatchObject({ statusCode: 409 });
    expect(first.output).toMatch(/step refused: a step does not start once its caller may have lost the lease/); // not started, not fenced
    expect((await since()).receipts).toHaveLength(1);
  }, 60_000);
});
