import { AddressInfo } from 'node:net';
import { Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { localClient } from './dynalite';

/**
 * A script's app in a process of its own: `controller` under the module on DYNAMODB_ENDPOINT and IDEMPOTENCY_TABLE, on
 * the module's defaults but for a 2 s lease, listening on a free port, its URL told over IPC (`startScript`).
 */
export async function serveJobs(controller: Type): Promise<void> {
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        client: localClient(process.env.DYNAMODB_ENDPOINT!),
        tableName: process.env.IDEMPOTENCY_TABLE,
        pendingTtlSeconds: 2,
      }),
    ],
    controllers: [controller],
  })
  class JobsModule {}

  const app = await NestFactory.create(JobsModule, { logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  process.send!({ url: `http://127.0.0.1:${port}` });
}
