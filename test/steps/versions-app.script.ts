/**
 * One app instance in a process of its own (started by versions.e2e-spec.ts with DYNAMODB_ENDPOINT, IDEMPOTENCY_TABLE,
 * EFFECTS_FILE and VERSION): version VERSION of a handler in two steps, as a rolling deploy runs two versions side by
 * side. `POST /orders` charges in step `charge`, then ships in step `ship` (version 2 renamed it from `ship-order`),
 * each appending `<step> <order> <version> <pid>` to EFFECTS_FILE. `POST /orders/restarting` is the same with
 * `onVersionChange: 'restart'`. CRASH=after-charge SIGKILLs this process between the steps. The module runs on its
 * defaults but for a 2 s lease. Tells its URL over IPC.
 */
import 'reflect-metadata';
import { appendFileSync } from 'node:fs';
import { Body, Controller, Post } from '@nestjs/common';
import { Idempotent, IdempotencyContext } from 'nestjs-dynamodb-idempotency';
import { serveJobs } from '../support/jobs-app';

const { EFFECTS_FILE, CRASH, VERSION } = process.env;
const effect = (step: string, order: string) => {
  appendFileSync(EFFECTS_FILE!, `${step} ${order} ${VERSION} ${process.pid}\n`);
  return { [step]: `${step}-${order}`, by: `${VERSION}:${process.pid}` };
};

@Controller('orders')
class OrdersController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  @Post()
  @Idempotent({ version: VERSION })
  order(@Body() { order }: { order: string }) {
    return this.run(order);
  }

  @Post('restarting')
  @Idempotent({ version: VERSION, onVersionChange: 'restart' })
  orderRestarting(@Body() { order }: { order: string }) {
    return this.run(order);
  }

  private async run(order: string) {
    const charge = await this.idempotency.step('charge', () => effect('charge', order));
    if (CRASH === 'after-charge') process.kill(process.pid, 'SIGKILL');
    const shipName = VERSION === '1' ? 'ship-order' : 'ship';
    const ship = await this.idempotency.step(shipName, () => effect('ship', order));
    return { ...charge, ...ship, answeredBy: `${VERSION}:${process.pid}` };
  }
}

void serveJobs(OrdersController);
