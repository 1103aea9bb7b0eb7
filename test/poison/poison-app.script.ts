/**
 * One app instance in a process of its own (started by poison-keys.e2e-spec.ts with DYNAMODB_ENDPOINT and
 * IDEMPOTENCY_TABLE), for a handler that takes its process down: `POST /jobs` appends `<payload> <pid>` to RUNS_FILE,
 * then with CRASH set SIGKILLs its own process (an out-of-memory on one payload, a native crash), with FLAKY set throws
 * 503 (a clean release, not a crash), else answers. The module runs on its defaults but for a 2 s lease. Tells its URL
 * over IPC.
 */
import 'reflect-metadata';
import { appendFileSync } from 'node:fs';
import { Body, Controller, Post, ServiceUnavailableException } from '@nestjs/common';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { serveJobs } from '../support/jobs-app';

@Controller('jobs')
class JobsController {
  @Post()
  @Idempotent()
  run(@Body() { payload }: { payload: string }) {
    appendFileSync(process.env.RUNS_FILE!, `${payload} ${process.pid}\n`);
    if (process.env.CRASH) process.kill(process.pid, 'SIGKILL');
    if (process.env.FLAKY) throw new ServiceUnavailableException('the provider is down');
    return { payload, ranBy: process.pid };
  }
}

void serveJobs(JobsController);
