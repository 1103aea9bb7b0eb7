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
import {
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  Injectable,
  Module,
  NestInterceptor,
  Post,
  RequestTimeoutException,
  UseInterceptors,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { catchError, Observable, throwError, timeout, TimeoutError } from 'rxjs';
import { Idempotent, IdempotencyModule, withLambdaContext } from '../../libs/idempotency/src';
import { lambdaContext } from './invocations';

/** The timeout interceptor of Nest's documentation. */
@Injectable()
class TimeoutInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      timeout(300),
      catchError((error) => throwError(() => (error instanceof TimeoutError ? new RequestTimeoutException() : error))),
    );
  }
}

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

const handler = withLambdaContext(async (event: unknown, context: ReturnType<typeof lambdaContext>) => {
  proxy ??= bootstrap();
  return (await proxy)(event, context);
});

process.on('message', async (message: { id: number; event: unknown; deadlineMs: number }) => {
  const context = lambdaContext(message.deadlineMs - Date.now());
  try {
    process.send!({ id: message.id, result: await handler(message.event, context) });
  } catch (error) {
    process.send!({ id: message.id, error: String(error) });
  }
});
process.on('disconnect', () => process.exit(0));
process.send!({ ready: true });
