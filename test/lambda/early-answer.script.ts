/**
 * A Lambda container (run by containers.ts) whose one idempotent route answers early: Nest's documented timeout
 * interceptor (300 ms) around a 1.5 s handler, behind `@codegenie/serverless-express` and `withLambdaContext`, as
 * docs/lambda.md writes the handler. Each run of the handler appends a line to RUNS_FILE, so the test counts the runs
 * of every container.
 */
import 'reflect-metadata';
import { appendFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { configure as serverlessExpress } from '@codegenie/serverless-express';
import { Body, Controller, Module, Post, UseInterceptors } from '@nestjs/common';
import type { Context } from 'aws-lambda';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { Idempotent, IdempotencyModule, withLambdaContext } from '../../libs/idempotency/src';
import { timeoutInterceptor } from '../support/timeout-interceptor';
import { serveInvocations } from './invocations';

/** The timeout interceptor of Nest's documentation, at 300 ms. */
const TimeoutInterceptor = timeoutInterceptor(300);

@Controller('charges')
class ChargesController {
  @Post()
  @UseInterceptors(TimeoutInterceptor)
  @Idempotent()
  async charge(@Body() body: { amount: number }) {
    await sleep(1500);
    const id = `ch_${randomUUID()}`;
    appendFileSync(process.env.RUNS_FILE!, `${id}\n`);
    return { id, amount: body.amount };
  }
}

@Module({
  imports: [
    IdempotencyModule.forRoot({
      tableName: process.env.IDEMPOTENCY_TABLE,
      clientConfig: {
        endpoint: process.env.DYNAMODB_ENDPOINT,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      },
      replayCache: { enabled: false },
    }),
  ],
  controllers: [ChargesController],
})
class AppModule {}

let proxy: Promise<(event: unknown, context: unknown) => Promise<unknown>> | undefined;

async function bootstrap() {
  const app = await NestFactory.create(AppModule, new ExpressAdapter(), { logger: ['error', 'warn'] });
  await app.init();
  const handle = serverlessExpress({ app: app.getHttpAdapter().getInstance() });
  return (event: unknown, context: unknown) => handle(event, context as never, () => undefined) as Promise<unknown>;
}

const handler = withLambdaContext(async (event: unknown, context: Context) => {
  proxy ??= bootstrap();
  return (await proxy)(event, context);
});

serveInvocations(handler, async () => undefined);
