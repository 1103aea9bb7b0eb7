/**
 * An SQS consumer in a process of its own (started by sqs.e2e-spec.ts), so that a test can run two of them and SIGKILL
 * one inside a message: a Nest application context with `@ssut/nestjs-sqs`, whose `@SqsMessageHandler` is an
 * `@Idempotent()` method of two steps, keyed by the message's `Idempotency-Key` attribute (its MessageId without one).
 * Each step appends a line to the EFFECTS file, the one record all processes share. Env: SQS_ENDPOINT, QUEUE_URL,
 * EFFECTS; CRASH_AFTER_CHARGE=1 kills the process between the steps.
 */
import { appendFileSync } from 'node:fs';
import { Injectable, Module } from '@nestjs/common';
import { SqsMessageHandler, SqsModule } from '@ssut/nestjs-sqs';
import type { Message } from '@aws-sdk/client-sqs';
import { Idempotent, IdempotencyContext } from 'nestjs-dynamodb-idempotency';
import { startWorkerContext, workerIdempotencyModule } from '../support/worker-context';
import { sqsClient } from '../support/sqs';

const { SQS_ENDPOINT, QUEUE_URL, EFFECTS, CRASH_AFTER_CHARGE } = process.env;

const keyOf = (message: Message) => message.MessageAttributes?.['Idempotency-Key']?.StringValue ?? message.MessageId!;

@Injectable()
class Payments {
  constructor(private readonly idempotency: IdempotencyContext) {}

  // Returns nothing: sqs-consumer deletes a message whose handler returns no object (a stored result would be taken
  // for the message to delete). waitMs: a redelivery whose key is held by a consumer that died waits for its lease.
  @SqsMessageHandler('payments')
  // The default fingerprint: the message's body and attributes (its receipt handle and receive counts are delivery
  // metadata, different on each delivery).
  @Idempotent({ name: 'payments.handle', key: keyOf, waitMs: 15_000 })
  async handle(message: Message): Promise<void> {
    const key = keyOf(message);
    await this.idempotency.step('charge', async () => appendFileSync(EFFECTS!, `charge ${key} ${process.pid}\n`));
    if (CRASH_AFTER_CHARGE === '1') process.kill(process.pid, 'SIGKILL');
    await this.idempotency.step('ship', async () => appendFileSync(EFFECTS!, `ship ${key} ${process.pid}\n`));
  }
}

@Module({
  imports: [
    workerIdempotencyModule(),
    SqsModule.register({
      consumers: [
        {
          name: 'payments',
          queueUrl: QUEUE_URL!,
          sqs: sqsClient(SQS_ENDPOINT!),
          messageAttributeNames: ['All'],
          waitTimeSeconds: 1,
          pollingWaitTimeMs: 50,
        },
      ],
    }),
  ],
  providers: [Payments],
})
class ConsumerModule {}

void startWorkerContext(ConsumerModule);
