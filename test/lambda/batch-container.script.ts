/**
 * A Lambda container (run by containers.ts) consuming SQS batches with `processBatch`, written as docs/queues-and-jobs.md
 * writes one: the Nest application context bootstrapped once per container (dropped when its bootstrap fails), each
 * record charged once. A record whose body starts with `slow` takes 2 s; one whose body starts with `crash` takes the
 * container's process down (SIGKILL) unless CRASH_FIXED is set. Each charge appends `<body> <pid>` to RUNS_FILE, so the
 * test counts the charges of every container. MAX_CRASHED_OWNERS, when set, is the module's `maxCrashedOwners`.
 */
import 'reflect-metadata';
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import { IdempotencyModule, IdempotencyService } from 'nestjs-dynamodb-idempotency';
import { processBatch } from 'nestjs-dynamodb-idempotency/lambda';
import { localClient } from '../support/dynalite';
import { serveInvocations } from './invocations';

@Module({
  imports: [
    IdempotencyModule.forRoot({
      client: localClient(process.env.DYNAMODB_ENDPOINT!),
      tableName: process.env.IDEMPOTENCY_TABLE,
      replayCache: { enabled: false },
      ...(process.env.MAX_CRASHED_OWNERS ? { maxCrashedOwners: Number(process.env.MAX_CRASHED_OWNERS) } : {}),
    }),
  ],
})
class ConsumerModule {}

let app: Promise<INestApplicationContext> | undefined;

function application(): Promise<INestApplicationContext> {
  app ??= NestFactory.createApplicationContext(ConsumerModule, { logger: ['error'] }).catch((error: unknown) => {
    app = undefined; // the next invocation tries again
    throw error;
  });
  return app;
}

async function charge(record: SQSRecord): Promise<void> {
  if (record.body.startsWith('slow')) await sleep(2000);
  appendFileSync(process.env.RUNS_FILE!, `${record.body} ${process.pid}\n`);
  if (record.body.startsWith('crash') && !process.env.CRASH_FIXED) process.kill(process.pid, 'SIGKILL');
}

const handler = async (event: SQSEvent, context: Context) =>
  processBatch(event, context, charge, {
    idempotency: (await application()).get(IdempotencyService),
    operation: 'charge',
  });

serveInvocations(handler as (event: unknown, context: Context) => Promise<unknown>, async () => {
  await (await app)?.close();
});
