import { configure as serverlessExpress } from '@codegenie/serverless-express';
import type { Context } from 'aws-lambda';
import { HttpAdapterHost, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { withLambdaContext } from 'nestjs-dynamodb-idempotency';
import { AppModule } from './app.module';
import { configFromEnv, OrdersApiConfig } from './config';
import { createDynamoClient } from './dynamodb';
import { registerPrometheusMetrics } from './metrics/prometheus';
import { ProblemDetailsFilter } from './problem-details.filter';

/** An API Gateway (REST or HTTP API) or ALB event in, its response out. */
export type LambdaHttpHandler = (event: unknown, context: Context) => Promise<unknown>;

/**
 * The demo as an AWS Lambda function (docs/lambda.md): the same Nest app (Express) behind
 * `@codegenie/serverless-express`, created once per container at its first invocation and reused. It creates no
 * table (a deployment does) and starts no reconciler (a scheduled job runs it). Every idempotent call knows the
 * invocation's deadline (`withLambdaContext`), so a timed-out invocation frees its key right after it.
 */
export function lambdaHandler(config: OrdersApiConfig): LambdaHttpHandler & { close(): Promise<void> } {
  let container: Promise<Container> | undefined;
  const handler = withLambdaContext(async (event: unknown, context: Context) => {
    // A failed bootstrap (a table not created yet, say) is dropped, so the next invocation tries again.
    container ??= createContainer(config).catch((error: unknown) => {
      container = undefined;
      throw error;
    });
    return (await container).proxy(event, context);
  });
  // Lambda never closes a container; tests and local runs do.
  return Object.assign(handler, { close: async () => (await container)?.close() });
}

interface Container {
  proxy: LambdaHttpHandler;
  close(): Promise<void>;
}

async function createContainer(config: OrdersApiConfig): Promise<Container> {
  registerPrometheusMetrics();
  const client = createDynamoClient(config, config.dynamoEndpoint);
  const app = await NestFactory.create(AppModule.forRoot(config, client), new ExpressAdapter(), {
    logger: ['error', 'warn', 'log'],
  });
  app.useGlobalFilters(new ProblemDetailsFilter(app.get(HttpAdapterHost).httpAdapter));
  await app.init();
  const proxy = serverlessExpress({
    app: app.getHttpAdapter().getInstance(),
    binarySettings: { contentTypes: ['application/octet-stream', 'application/pdf', 'image/*'] },
  });
  return {
    // The adapter answers through the returned promise (its default PROMISE mode); the callback is never used.
    proxy: (event, context) => proxy(event, context, () => undefined) as Promise<unknown>,
    close: async () => {
      await app.close();
      client.destroy();
    },
  };
}

/** The function's handler: `apps/orders-api/src/lambda.handler`, configured from the environment. */
export const handler = lambdaHandler(configFromEnv());
