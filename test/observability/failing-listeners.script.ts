/**
 * Run by failing-listeners.e2e-spec.ts in a process of its own: an app whose outcome listeners all fail (an async
 * `onOutcome` that rejects, diagnostics-channel subscribers that throw and reject), on dynalite in this process.
 * Prints `listening <url>`. In Jest's own process an unhandled rejection does not end anything, so only a process of
 * its own shows whether one would.
 */
import { subscribe } from 'node:diagnostics_channel';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Idempotent, IdempotencyModule, OUTCOME_CHANNEL } from 'nestjs-dynamodb-idempotency';
import { localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';

@Controller('orders')
class OrdersController {
  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    return { ordered: body.amount, at: process.hrtime.bigint().toString() };
  }
}

void (async () => {
  const dynamo = await startDynalite();
  const client = localClient(dynamo.endpoint);
  const tableName = uniqueTableName('listeners');
  await createIdempotencyTable(client, tableName);
  subscribe(OUTCOME_CHANNEL, () => {
    throw new Error('subscriber threw');
  });
  subscribe(OUTCOME_CHANNEL, async () => {
    await Promise.resolve();
    throw new Error('subscriber rejected');
  });
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        client,
        tableName,
        replayCache: { enabled: false },
        onOutcome: async () => {
          await new Promise((resolve) => setTimeout(resolve, 5));
          throw new Error('the metrics endpoint is down');
        },
      }),
    ],
    controllers: [OrdersController],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  console.log(`listening ${await app.getUrl()}`);
})();
