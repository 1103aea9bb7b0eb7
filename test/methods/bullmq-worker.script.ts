/**
 * A BullMQ worker in a process of its own (started by bullmq.e2e-spec.ts), so that a test can run two of them and
 * SIGKILL one inside a job: a Nest application context whose `@Processor` has an `@Idempotent()` `process(job)` of two
 * steps. What each step does is pushed to a Redis list (`effects`), the one record all processes share. Env:
 * REDIS_PORT, QUEUE, DYNAMODB_ENDPOINT, IDEMPOTENCY_TABLE; CRASH_AFTER_CHARGE=1 kills the process between the steps.
 */
import { Module } from '@nestjs/common';
import { BullModule, Processor, WorkerHost } from '@nestjs/bullmq';
import { Job } from 'bullmq';
import Redis from 'ioredis';
import { Idempotent, IdempotencyContext } from 'nestjs-dynamodb-idempotency';
import { startWorkerContext, workerIdempotencyModule } from '../support/worker-context';

const { REDIS_PORT, QUEUE, CRASH_AFTER_CHARGE } = process.env;
const connection = { host: '127.0.0.1', port: Number(REDIS_PORT) };
const effects = new Redis(connection);

export interface Payment {
  messageId: string;
  amount: number;
}

// A dead worker's job is found stalled within a second or two and handed to another worker.
@Processor(QUEUE!, { lockDuration: 2000, stalledInterval: 1000 })
class Payments extends WorkerHost {
  constructor(private readonly idempotency: IdempotencyContext) {
    super();
  }

  // waitMs: a job whose key is held by a worker that died waits for its lease to end, then resumes its steps. The
  // default fingerprint: the job's name and data (its id, attempts, lock token and signal are delivery metadata).
  @Idempotent({ name: 'payments.process', key: (job: Job<Payment>) => job.data.messageId, waitMs: 15_000 })
  async process(job: Job<Payment>): Promise<{ chargeId: string; shippedBy: number }> {
    const chargeId = await this.idempotency.step('charge', async () => {
      await effects.rpush('effects', `charge ${job.data.messageId} ${process.pid}`);
      return `ch-${job.data.messageId}`;
    });
    if (CRASH_AFTER_CHARGE === '1') process.kill(process.pid, 'SIGKILL');
    await this.idempotency.step('ship', () => effects.rpush('effects', `ship ${job.data.messageId} ${process.pid}`));
    return { chargeId, shippedBy: process.pid };
  }
}

@Module({
  imports: [workerIdempotencyModule(), BullModule.forRoot({ connection }), BullModule.registerQueue({ name: QUEUE! })],
  providers: [Payments],
})
class WorkerModule {}

void startWorkerContext(WorkerModule);
