/**
 * One app instance in a process of its own (started by outcomes-by-key.e2e-spec.ts with DYNAMODB_ENDPOINT and
 * IDEMPOTENCY_TABLE): `POST /jobs`, scoped by the caller's `x-tenant`, prints `job started <payload>`, takes JOB_MS
 * (default 0), appends `<payload> <pid>` to RUNS_FILE and answers 201; `GET /jobs/outcome` is its outcome door. The
 * module runs on its defaults but for a 2 s lease. Tells its URL over IPC.
 */
import 'reflect-metadata';
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Body, Controller, Get, Post } from '@nestjs/common';
import { Idempotent, IdempotentOutcome } from 'nestjs-dynamodb-idempotency';
import { serveJobs } from '../support/jobs-app';

@Controller('jobs')
class JobsController {
  @Post()
  @Idempotent({ scope: (_context, request) => request?.headers['x-tenant'] })
  async run(@Body() { payload }: { payload: string }) {
    console.log(`job started ${payload}`);
    await sleep(Number(process.env.JOB_MS ?? 0));
    appendFileSync(process.env.RUNS_FILE!, `${payload} ${process.pid}\n`);
    return { payload, ranBy: process.pid };
  }

  @Get('outcome')
  @IdempotentOutcome('POST /jobs')
  outcome() {
    throw new Error('an outcome door never runs its handler');
  }
}

void serveJobs(JobsController);
