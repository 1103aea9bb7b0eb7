import { randomUUID } from 'node:crypto';
import { AttributeValue, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import {
  Body,
  CallHandler,
  ConflictException,
  Controller,
  ExecutionContext,
  Get,
  Headers,
  HttpCode,
  Inject,
  Injectable,
  NestInterceptor,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import {
  Idempotent,
  IdempotencyContext,
  IdempotencyInFlightError,
  IdempotencyService,
} from 'nestjs-dynamodb-idempotency';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';
import { dynamoCalls } from './call-counter';
import { floorCalls } from './floor-calls';
import { MemoryFloorInterceptor } from './memory-floor.interceptor';

export const POWERTOOLS_TABLE = 'powertools_idempotency';

interface BenchEvent {
  key: string;
  body: unknown;
}

/** Does nothing: `/bench/intercepted` measures what Nest's interceptor pipeline alone costs. */
@Injectable()
class PassThroughInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle();
  }
}

/** Only has IdempotencyContext injected (BENCH_TRACK_CALLS=1): the module then tracks calls, as for the orders. */
@Injectable()
export class ContextUser {
  constructor(readonly context: IdempotencyContext) {}
}

/**
 * Routes for `npm run bench` only (BENCH_ROUTES=1): the same trivial handler bare, behind `@Idempotent()`, behind
 * Powertools' `makeIdempotent` with its DynamoDB persistence layer on the same endpoint and client, and behind the
 * floor: by hand, exactly the DynamoDB calls the module needs and nothing else.
 */
@Controller('bench')
export class BenchController {
  private readonly powertools: (event: BenchEvent) => Promise<unknown>;
  private readonly tableName: string;

  constructor(
    private readonly client: DynamoDBClient,
    private readonly idempotency: IdempotencyService,
    @Inject(ORDERS_API_CONFIG) config: OrdersApiConfig,
  ) {
    this.tableName = config.idempotencyTable;
    // Loaded here only: a dev dependency, for the comparison. Subpath export, so no static types.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { makeIdempotent, IdempotencyConfig } = require('@aws-lambda-powertools/idempotency');
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { DynamoDBPersistenceLayer } = require('@aws-lambda-powertools/idempotency/dynamodb');
    const powertoolsConfig = new IdempotencyConfig({
      eventKeyJmesPath: 'key',
      useLocalCache: config.replayCache,
      maxLocalCacheSize: 1000,
    });
    // Outside Lambda there is no invocation deadline: a fixed 60 s one gives Powertools the same in-progress lease as
    // the module's default, and spares it a console warning on every call.
    powertoolsConfig.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 });
    this.powertools = makeIdempotent(async (event: BenchEvent) => work(event.body), {
      persistenceStore: new DynamoDBPersistenceLayer({ tableName: POWERTOOLS_TABLE, awsSdkV3Client: client }),
      config: powertoolsConfig,
    });
  }

  @Post('plain')
  @HttpCode(200)
  plain(@Body() body: unknown) {
    return work(body);
  }

  /** The plain route behind an interceptor that does nothing: what Nest's interceptor pipeline alone costs. */
  @Post('intercepted')
  @HttpCode(200)
  @UseInterceptors(PassThroughInterceptor)
  intercepted(@Body() body: unknown) {
    return work(body);
  }

  @Post('idempotent')
  @HttpCode(200)
  @Idempotent()
  idempotent(@Body() body: unknown) {
    return work(body);
  }

  @Post('powertools')
  @HttpCode(200)
  async powertoolsRoute(@Headers('idempotency-key') key: string, @Body() body: unknown) {
    try {
      return await this.powertools({ key, body });
    } catch (error) {
      if ((error as Error).name === 'IdempotencyAlreadyInProgressError') throw new ConflictException('in progress');
      throw error;
    }
  }

  /**
   * The module called inside a plain handler (`IdempotencyService.execute`), the way Powertools is: no interceptor,
   * the body as the fingerprint. What a team that needs the last few percent can use.
   */
  @Post('execute')
  @HttpCode(200)
  async execute(@Headers('idempotency-key') key: string, @Body() body: unknown) {
    try {
      return await this.idempotency.execute({ operation: 'bench-execute', key, fingerprint: body }, () => work(body));
    } catch (error) {
      if (error instanceof IdempotencyInFlightError) throw new ConflictException('in progress');
      throw error;
    }
  }

  @Post('optimistic')
  @HttpCode(200)
  @Idempotent({ mode: 'optimistic' })
  optimistic(@Body() body: unknown) {
    return work(body);
  }

  /**
   * The floor: the module's claim (an `UpdateItem`), the work, the module's completion (an `UpdateItem` with the response
   * as JSON), sent by hand (floor-calls.ts). A lost claim answers from the old item the failed condition returns (read
   * with a consistent `GetItem` on dynalite, which returns none), as the module does. No hashing, fingerprint, lease,
   * cache or telemetry.
   */
  @Post('floor')
  @HttpCode(200)
  floor(@Headers('idempotency-key') key: string, @Body() body: unknown) {
    return this.floorCalls('POST /bench/floor', key, body);
  }

  /** The floor inside a pass-through interceptor: what any interceptor that makes those calls must pay. */
  @Post('floor-intercepted')
  @HttpCode(200)
  @UseInterceptors(PassThroughInterceptor)
  floorIntercepted(@Headers('idempotency-key') key: string, @Body() body: unknown) {
    return this.floorCalls('POST /bench/floor-intercepted', key, body);
  }

  /** The in-memory floor: by hand, what any interceptor making a route idempotent on a process-local store must do. */
  @Post('floor-memory')
  @HttpCode(200)
  @UseInterceptors(MemoryFloorInterceptor)
  floorMemory(@Body() body: unknown) {
    return work(body);
  }

  /** Calls so far, CPU time used (µs), and the monotonic clock (µs) that `--cpu-prof` timestamps samples with. */
  @Get('stats')
  stats() {
    const { user, system } = process.cpuUsage();
    return { dynamoCalls, cpuMicros: user + system, monotonicMicros: Number(process.hrtime.bigint() / 1000n) };
  }

  /** Ends the process normally, so that `node --cpu-prof` writes its profile. */
  @Post('exit')
  @HttpCode(202)
  exit() {
    setTimeout(() => process.exit(0), 50);
    return { exiting: true };
  }

  private async floorCalls(route: string, key: string, body: unknown) {
    const pk = `${route}#${key}`;
    const now = Math.floor(Date.now() / 1000);
    const claimToken = randomUUID();
    try {
      await floorCalls.claim(this.client, this.tableName, pk, claimToken, now);
    } catch (error) {
      if ((error as Error).name !== 'ConditionalCheckFailedException') throw error;
      // The old item comes back with the failed condition (DynamoDB, DynamoDB Local); dynalite sends none: read it.
      let item = (error as { Item?: Record<string, AttributeValue> }).Item;
      if (!item) {
        const read = new GetItemCommand({ TableName: this.tableName, Key: { pk: { S: pk } }, ConsistentRead: true });
        item = (await this.client.send(read)).Item;
      }
      if (item?.status?.S !== 'COMPLETED') throw new ConflictException('in progress');
      return JSON.parse(item.response.S!).body;
    }
    const result = work(body);
    await floorCalls.complete(this.client, this.tableName, pk, claimToken, now, result);
    return result;
  }
}

/** The "business logic": trivial on purpose, so the figures are the idempotency layer's. */
function work(body: unknown) {
  return { ok: true, received: body };
}
