/**
 * An app instance in a process of its own (started by listeners.e2e-spec.ts), so that a test can run two and SIGKILL
 * one inside a listener: a Nest application context with an `@OnEvent` listener of two steps and, with CRON=1, a
 * `@Cron` job every second that calls an `@Idempotent()` method keyed by the tick. Each effect appends a line to the
 * EFFECTS file, the one record all processes share. The test delivers events over IPC (`{ id, event }`, answered
 * `{ id, result }` or `{ id, error }`), the way a bus fans a message out to every instance, or an emitter delivers it
 * again. Env: EFFECTS, CRON; `{ arm: true }` makes the next listener or job this
 * process runs SIGKILL it inside (a listener after its first step).
 */
import { appendFileSync } from 'node:fs';
import { Injectable, Module } from '@nestjs/common';
import { EventEmitter2, EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { Cron, ScheduleModule } from '@nestjs/schedule';
import { Idempotent, IdempotencyContext, tickKey } from 'nestjs-dynamodb-idempotency';
import { startWorkerContext, workerIdempotencyModule } from '../support/worker-context';

const { EFFECTS, CRON } = process.env;
const effect = (line: string) => appendFileSync(EFFECTS!, `${line} ${process.pid}\n`);
let armed = false;

export interface OrderPaid {
  orderId: string;
  amount: number;
}

@Injectable()
class Fulfilment {
  constructor(private readonly idempotency: IdempotencyContext) {}

  // waitMs: a delivery whose key is held by an instance that died waits for its lease to end, then resumes its steps.
  @OnEvent('order.paid')
  @Idempotent({ name: 'fulfilment.fulfil', key: (event: OrderPaid) => event.orderId, waitMs: 15_000 })
  async fulfil(event: OrderPaid): Promise<{ chargeId: string; shippedBy: number }> {
    const chargeId = await this.idempotency.step('charge', async () => {
      effect(`charge ${event.orderId}`);
      return `ch-${event.orderId}`;
    });
    if (armed) process.kill(process.pid, 'SIGKILL');
    await this.idempotency.step('ship', async () => effect(`ship ${event.orderId}`));
    return { chargeId, shippedBy: process.pid };
  }
}

@Injectable()
class Reports {
  @Cron('* * * * * *', { disabled: CRON !== '1' })
  everySecond(): Promise<void> {
    return this.report(tickKey(1));
  }

  // One run per tick across instances; a tick whose runner died is run, later, by an instance that waited for it: the
  // tick is an argument, so that late run still knows which tick it is.
  @Idempotent({ name: 'reports.report', key: (tick: string) => tick, waitMs: 5000 })
  async report(tick: string): Promise<void> {
    if (armed) {
      effect(`died ${tick}`);
      process.kill(process.pid, 'SIGKILL');
    }
    effect(`report ${tick}`);
  }
}

@Module({
  imports: [workerIdempotencyModule(), EventEmitterModule.forRoot(), ScheduleModule.forRoot()],
  providers: [Fulfilment, Reports],
})
class InstanceModule {}

// The handler is set before any message can arrive: the parent's first one comes after 'ready', on a later turn.
void startWorkerContext(InstanceModule).then((app) => {
  const emitter = app.get(EventEmitter2);
  process.on('message', (message: { id?: number; event?: OrderPaid; arm?: boolean }) => {
    if (message.arm) armed = true;
    if (message.event === undefined) return;
    emitter.emitAsync('order.paid', message.event).then(
      ([result]) => process.send!({ id: message.id, result }),
      (error: Error) => process.send!({ id: message.id, error: error.message }),
    );
  });
});
