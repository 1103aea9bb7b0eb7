import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Body, ConflictException, Controller, Get, Headers, HttpCode, Inject, Post } from '@nestjs/common';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';
import { dynamoCalls } from './call-counter';

export const POWERTOOLS_TABLE = 'powertools_idempotency';

interface BenchEvent {
  key: string;
  body: unknown;
}

/**
 * Routes for `npm run bench` only (BENCH_ROUTES=1): the same trivial handler bare, behind `@Idempotent()`, and
 * behind Powertools' `makeIdempotent` with its DynamoDB persistence layer on the same endpoint and client.
 */
@Controller('bench')
export class BenchController {
  private readonly powertools: (event: BenchEvent) => Promise<unknown>;

  constructor(client: DynamoDBClient, @Inject(ORDERS_API_CONFIG) config: OrdersApiConfig) {
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

  @Get('stats')
  stats() {
    const { user, system } = process.cpuUsage();
    return { dynamoCalls, cpuMicros: user + system };
  }
}

/** The "business logic": trivial on purpose, so the figures are the idempotency layer's. */
function work(body: unknown) {
  return { ok: true, received: body };
}
