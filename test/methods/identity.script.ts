/**
 * An app instance in a process of its own (started by operation-identity.e2e-spec.ts): its consumer is a class made by
 * Nest's `mixin()` (as a generic `QueueConsumer(queue)` is), whose runtime name is random in every process. Its
 * `@Idempotent()` method has a `name`, so every process keeps its records under the same operation. The test delivers
 * messages over IPC (`{ id, message }`, answered `{ id, result }`); each run appends a line to the EFFECTS file.
 */
import { appendFileSync } from 'node:fs';
import { Injectable, mixin, Module, Type } from '@nestjs/common';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { startWorkerContext, workerIdempotencyModule } from '../support/worker-context';

export interface Message {
  id: string;
  amount: number;
}

const CONSUMER = Symbol('consumer');

function QueueConsumer(queue: string): Type<{ consume(message: Message): Promise<string> }> {
  @Injectable()
  class Consumer {
    @Idempotent({ name: `consume.${queue}`, key: (message: Message) => message.id })
    async consume(message: Message): Promise<string> {
      appendFileSync(process.env.EFFECTS!, `${queue} ${message.id} ${process.pid}\n`);
      return `${queue}:${message.id}:${process.pid}`;
    }
  }
  return mixin(Consumer);
}

@Module({
  imports: [workerIdempotencyModule()],
  providers: [{ provide: CONSUMER, useClass: QueueConsumer('payments') }],
})
class InstanceModule {}

void startWorkerContext(InstanceModule).then((app) => {
  const consumer = app.get<{ consume(message: Message): Promise<string> }>(CONSUMER);
  process.on('message', ({ id, message }: { id: number; message: Message }) => {
    consumer.consume(message).then(
      (result) => process.send!({ id, result, className: consumer.constructor.name }),
      (error: Error) => process.send!({ id, error: error.message }),
    );
  });
});
