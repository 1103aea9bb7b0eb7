import { DynamicModule, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { localClient } from './dynalite';

/**
 * The child side of a worker script (started by script-process.ts): the module on the table its environment names
 * (DYNAMODB_ENDPOINT, IDEMPOTENCY_TABLE) with 2 s leases, so that a killed worker's key is taken over quickly, and the
 * replay cache off, so that every call reaches the store.
 */
export function workerIdempotencyModule(): DynamicModule {
  return IdempotencyModule.forRoot({
    client: localClient(process.env.DYNAMODB_ENDPOINT!),
    tableName: process.env.IDEMPOTENCY_TABLE!,
    pendingTtlSeconds: 2,
    replayCache: { enabled: false },
  });
}

/** Starts the worker's application context, then tells the parent it is ready (its first IPC message). */
export async function startWorkerContext(module: Type) {
  const app = await NestFactory.createApplicationContext(module, { logger: ['warn'] });
  app.enableShutdownHooks();
  process.send?.('ready');
  return app;
}
