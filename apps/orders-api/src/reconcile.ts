import { Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyModule, IdempotencyReconciler } from 'nestjs-dynamodb-idempotency';
import { configFromEnv } from './config';
import { createDynamoClient } from './dynamodb';

/**
 * `npm run reconcile`: one reconciler sweep over the idempotency table, then exit. Uses DYNAMODB_ENDPOINT
 * (a shared dynalite, say) or, when unset, DynamoDB itself in AWS_REGION: the demo's embedded dynalite lives
 * inside the app's own process and cannot be reached from here.
 */
async function main(): Promise<void> {
  const config = configFromEnv();
  const client = createDynamoClient(config, config.dynamoEndpoint);
  @Module({
    imports: [IdempotencyModule.forRoot({ client, tableName: config.idempotencyTable, ...config.idempotencyLayout })],
  })
  class ReconcileModule {}

  const context = await NestFactory.createApplicationContext(ReconcileModule, { logger: ['error', 'warn', 'log'] });
  try {
    const result = await context.get(IdempotencyReconciler).sweep();
    new Logger('Reconcile').log(
      `${config.idempotencyTable} at ${config.dynamoEndpoint ?? 'AWS'}: ${JSON.stringify(result)}`,
    );
  } finally {
    await context.close();
    client.destroy();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
