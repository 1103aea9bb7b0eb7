/**
 * A purchase in two recovery points through `IdempotencyService.execute`, in a process of its own (a queue worker, say),
 * so that a test can SIGKILL it between the steps: started by steps-interrupted.e2e-spec.ts with DYNAMODB_ENDPOINT,
 * IDEMPOTENCY_TABLE and PAYMENTS_URL (the demo's payment provider). It takes jobs over IPC (`{ id, key }`) and answers
 * `{ id, value }` or `{ id, error }`, with `serialization: 'advanced'`, so a `Date` arrives as a `Date`.
 * PURCHASE_FAULT: `pause-after-charge` announces `{ paused: 'after-charge' }` and waits for its end; `fail-after-charge`
 * throws an error that is not final after the charge.
 */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyContext, IdempotencyModule, IdempotencyService } from 'nestjs-dynamodb-idempotency';
import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';
import { localClient } from '../support/dynalite';

const { DYNAMODB_ENDPOINT, IDEMPOTENCY_TABLE, PAYMENTS_URL, PURCHASE_FAULT } = process.env;

@Module({
  imports: [
    IdempotencyModule.forRoot({
      client: localClient(DYNAMODB_ENDPOINT!),
      tableName: IDEMPOTENCY_TABLE!,
      pendingTtlSeconds: 2,
      replayCache: { enabled: false },
    }),
  ],
})
class WorkerModule {}

/** The provider, called with the step's key: inside a step, the retrying client's default key is that key. */
const payments = createIdempotentClient({ baseUrl: PAYMENTS_URL!, maxElapsedMs: 10_000 });

async function purchase(context: IdempotencyContext) {
  const ranHere: string[] = [];
  const charge = await context.step('charge', async ({ attempt }) => {
    ranHere.push(`charge#${attempt}`);
    const answer = await payments.request<{ chargeId: string; chargedAt: string }>('POST', '/payments/charges', {
      body: { amount: 1250 },
    });
    return { chargeId: answer.body.chargeId, chargedAt: new Date(answer.body.chargedAt), chargedBy: process.pid };
  });
  if (PURCHASE_FAULT === 'pause-after-charge') {
    process.send!({ paused: 'after-charge' });
    await new Promise(() => undefined); // until the test kills this process
  }
  if (PURCHASE_FAULT === 'fail-after-charge') throw new Error('a simulated outage after the charge');
  const receipt = await context.step('receipt', async ({ attempt }) => {
    ranHere.push(`receipt#${attempt}`);
    const answer = await payments.request<{ receiptId: string }>('POST', '/payments/receipts', {
      body: { chargeId: charge.chargeId },
    });
    return { receiptId: answer.body.receiptId };
  });
  return { ...charge, ...receipt, ranHere };
}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: ['warn'] });
  const service = app.get(IdempotencyService);
  process.on('message', (job: { id: number; key: string }) => {
    // waitMs: a job for a key whose owner died waits for its lease to end, then takes it over.
    service.execute({ operation: 'purchase', key: job.key, waitMs: 15_000 }, purchase).then(
      (value) => process.send!({ id: job.id, value }),
      (error: Error) => process.send!({ id: job.id, error: `${error.name}: ${error.message}` }),
    );
  });
  process.send!({ ready: process.pid });
}

void main();
