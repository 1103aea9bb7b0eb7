// The module's own work per call, in one process and without I/O: `IdempotencyInterceptor` called as Nest's router
// calls an interceptor (one ExecutionContext per request, over Express-shaped request and response objects, the
// handler answering at once), against its floor under the same calls:
// - MODULE_CPU_STORE=memory (default): the in-memory store, against `/bench/floor-memory`'s interceptor;
// - MODULE_CPU_STORE=dynamodb: the DynamoDB repository on a client whose HTTP handler answers `{}` at once (a new
//   key's claim and completion), against `/bench/floor-intercepted`: a pass-through interceptor around the floor's
//   two calls (the module's requests, sent by hand), the same client.
// The app's metrics are registered as the demo's are. Rounds alternate after a warm-up (the JIT, and the in-memory
// store filled to its bound). Figures are CPU µs per call, or, under `valgrind --tool=callgrind` with
// MODULE_CPU_CALLGRIND=<its --callgrind-out-file>, thousands of instructions per call, which the machine's speed does
// not move. MODULE_CPU_UNKEYED_CALLS sets the module's `unkeyedCalls`; MODULE_CPU_TRACK_CALLS=1 injects
// `IdempotencyContext` (calls tracked through AsyncLocalStorage whatever that option says). Prints JSON: every round, and the medians. Run by bench.mjs:
//   node test/support/run-ts.cjs bench/module-cpu.ts
import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { CallHandler, Controller, ExecutionContext, Injectable, Module, NestInterceptor, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import { ExpressAdapter } from '@nestjs/platform-express';
import {
  IdempotencyInterceptor,
  IdempotencyModule,
  IdempotencyModuleOptions,
  Idempotent,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { defer, lastValueFrom, Observable, of } from 'rxjs';
import { ContextUser } from '../apps/orders-api/src/bench/bench.controller';
import { floorCalls } from '../apps/orders-api/src/bench/floor-calls';
import { MemoryFloorInterceptor } from '../apps/orders-api/src/bench/memory-floor.interceptor';
import { registerPrometheusMetrics } from '../apps/orders-api/src/metrics/prometheus';
import { instantClient } from './instant-client.cjs';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
const STORE = process.env.MODULE_CPU_STORE === 'dynamodb' ? 'dynamodb' : 'memory';
const CALLS = Number(process.env.MODULE_CPU_CALLS ?? 40_000);
const WARM_UP_CALLS = Number(process.env.MODULE_CPU_WARM_UP_CALLS ?? 120_000);
const ROUNDS = Number(process.env.MODULE_CPU_ROUNDS ?? 7);
const CALLGRIND = process.env.MODULE_CPU_CALLGRIND;
/** MODULE_CPU_UNKEYED_CALLS: the module's `unkeyedCalls` (unset: its default). */
const UNKEYED_CALLS = process.env.MODULE_CPU_UNKEYED_CALLS as IdempotencyModuleOptions['unkeyedCalls'];
/** MODULE_CPU_TRACK_CALLS=1: a provider injects `IdempotencyContext`, so calls are tracked whatever `unkeyedCalls` is. */
const TRACK_CALLS = process.env.MODULE_CPU_TRACK_CALLS === '1';
const CONCURRENCY = 20;
const TABLE = 'bench';

@Controller('bench')
class BenchController {
  @Post('idempotent')
  @Idempotent()
  idempotent(): unknown {
    return undefined; // never called: the harness hands the interceptor its handler's answer
  }
}

/** `/bench/floor-intercepted`: a pass-through interceptor around the floor's claim, the work, and its completion. */
@Injectable()
class DynamoFloorInterceptor implements NestInterceptor {
  constructor(private readonly client: DynamoDBClient) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const { headers } = context.switchToHttp().getRequest<{ headers: Record<string, string> }>();
    const pk = `POST /bench/floor-intercepted#${headers['idempotency-key']}`;
    return defer(async () => {
      const now = Math.floor(Date.now() / 1000);
      const claimToken = randomUUID();
      await floorCalls.claim(this.client, TABLE, pk, claimToken, now);
      const result = await lastValueFrom(next.handle());
      await floorCalls.complete(this.client, TABLE, pk, claimToken, now, result);
      return result;
    });
  }
}

let n = 0;
/** One request as Express hands it over, with its response. */
function exchange() {
  const body = { item: 'book', quantity: 1 };
  const headers = {
    'content-type': 'application/json',
    'content-length': '28',
    'idempotency-key': `key-${process.pid}-${n++}`,
  };
  const request = {
    method: 'POST',
    url: '/bench/idempotent',
    originalUrl: '/bench/idempotent',
    headers,
    body,
    params: {},
    query: {},
    readableEnded: true,
    socket: { destroyed: false },
  };
  const sent = new Map<string, unknown>([['x-powered-by', 'Express']]);
  const response = {
    statusCode: 200,
    writableFinished: false,
    get: (name: string) => sent.get(name.toLowerCase()),
    set: (name: string, value: unknown) => sent.set(name.toLowerCase(), value),
    status(code: number) {
      this.statusCode = code;
      return this;
    },
  };
  return { request, response, body };
}

let dumps = 0;
/** callgrind_control on this process: zero the counts, or dump them and read the instructions since. */
function callgrind(command: '-z' | '-d'): number {
  execFileSync('callgrind_control', [command, String(process.pid)], { stdio: 'ignore' });
  if (command === '-z') return 0;
  const text = readFileSync(`${CALLGRIND}.${++dumps}`, 'utf8');
  return Number(/^(?:summary|totals): (\d+)/m.exec(text)![1]);
}

/** CPU µs (or thousands of instructions) per call of `interceptor`, `calls` of them, CONCURRENCY at a time. */
async function measure(interceptor: NestInterceptor, calls: number): Promise<number> {
  const handler = BenchController.prototype.idempotent;
  const one = () => {
    const { request, response, body } = exchange();
    const context = new ExecutionContextHost([request, response, () => undefined], BenchController, handler);
    context.setType('http');
    const next: CallHandler = { handle: () => of({ ok: true, received: body }) };
    return lastValueFrom(interceptor.intercept(context, next) as Observable<unknown>);
  };
  if (CALLGRIND) callgrind('-z');
  const started = process.cpuUsage();
  let left = calls;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) await one();
    }),
  );
  if (CALLGRIND) return callgrind('-d') / calls / 1000;
  const { user, system } = process.cpuUsage(started);
  return (user + system) / calls;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function main() {
  registerPrometheusMetrics();
  const client = instantClient();
  const options: IdempotencyModuleOptions = {
    tableName: TABLE,
    replayCache: { enabled: false },
    startupCheck: false,
    ...(UNKEYED_CALLS ? { unkeyedCalls: UNKEYED_CALLS } : {}),
    ...(STORE === 'memory' ? { repository: new InMemoryIdempotencyRepository() } : { client }),
  };
  @Module({
    imports: [IdempotencyModule.forRoot(options)],
    controllers: [BenchController],
    providers: TRACK_CALLS ? [ContextUser] : [],
  })
  class BenchModule {}
  const app = await NestFactory.create(BenchModule, new ExpressAdapter(), { logger: false });
  await app.init();
  const module = app.get(IdempotencyInterceptor);
  const floor = STORE === 'memory' ? new MemoryFloorInterceptor() : new DynamoFloorInterceptor(client);
  await measure(module, WARM_UP_CALLS);
  await measure(floor, WARM_UP_CALLS);
  const runs = { module: [] as number[], floor: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    runs.module.push(await measure(module, CALLS));
    runs.floor.push(await measure(floor, CALLS));
  }
  const ratios = runs.module.map((value, i) => value / runs.floor[i]);
  const unit = CALLGRIND ? 'thousand instructions' : 'CPU µs';
  console.log(
    JSON.stringify({
      store: STORE,
      unkeyedCalls: UNKEYED_CALLS ?? 'default',
      trackCalls: TRACK_CALLS,
      unit,
      runs,
      module: median(runs.module),
      floor: median(runs.floor),
      ratio: median(ratios),
    }),
  );
  await app.close();
}

void main();
