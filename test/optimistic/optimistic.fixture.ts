import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Body, Controller, HttpException, Inject, Injectable, Post, Res } from '@nestjs/common';
import {
  Idempotent,
  IdempotencyContext,
  IdempotencyModule,
  IdempotencyModuleOptions,
} from 'nestjs-dynamodb-idempotency';
import { ORDERS_TABLE } from '../transactions/shop.fixture';

/** How often each handler ran. */
@Injectable()
export class OptimisticRuns {
  orders = 0;
  quotes = 0;
  /** The next runs of `POST /quotes` that fail transiently (a provider's 502: not final, nothing stored). */
  quoteFailures = 0;
}

export interface OrderBody {
  item: string;
  /** Hold the handler this long (concurrent duplicates overlap). */
  delayMs?: number;
  /** A second write whose condition fails (`attribute_exists` on an absent item): the commit is rejected. */
  refused?: boolean;
  /** Fail with a 402 (a final error under the default storeIf). */
  declined?: boolean;
}

/**
 * `POST /orders` in optimistic mode: a new order (a fresh id every run) handed to `commitWith`, so it exists only with
 * the key's COMPLETED record. `POST /quotes`: optimistic, no effects at all (one `PutItem`, also on dynalite).
 */
@Controller()
export class OptimisticController {
  constructor(
    private readonly context: IdempotencyContext,
    private readonly runs: OptimisticRuns,
    @Inject(ORDERS_TABLE) private readonly ordersTable: string,
  ) {}

  @Post('orders')
  @Idempotent({ mode: 'optimistic' })
  async order(@Body() body: OrderBody) {
    this.runs.orders += 1;
    if (body.delayMs) await sleep(body.delayMs);
    if (body.declined) throw new PaymentDeclined();
    const order = { id: randomUUID(), item: body.item };
    this.context.commitWith({
      Put: { TableName: this.ordersTable, Item: order, ConditionExpression: 'attribute_not_exists(id)' },
    });
    if (body.refused) {
      this.context.commitWith({
        ConditionCheck: {
          TableName: this.ordersTable,
          Key: { id: 'never-written' },
          ConditionExpression: 'attribute_exists(id)',
        },
      });
    }
    return order;
  }

  @Post('quotes')
  @Idempotent({ mode: 'optimistic' })
  async quote(@Body() body: { item: string; delayMs?: number }, @Res({ passthrough: true }) response: any) {
    this.runs.quotes += 1;
    const quoteId = randomUUID();
    // Headers of this run's own (a losing run's must not go out with the winner's body).
    (response.header ?? response.setHeader).call(response, 'X-Quote-Id', quoteId);
    (response.header ?? response.setHeader).call(response, 'ETag', `"${quoteId}"`);
    (response.header ?? response.setHeader).call(response, 'Set-Cookie', `quote=${quoteId}`);
    if (body.delayMs) await sleep(body.delayMs);
    if (this.runs.quoteFailures > 0) {
      this.runs.quoteFailures -= 1;
      throw new HttpException({ message: 'the provider failed' }, 502);
    }
    return { quoteId, item: body.item, claimToken: this.context.claimToken };
  }
}

class PaymentDeclined extends HttpException {
  constructor() {
    super({ message: 'declined' }, 402);
  }
}

export function optimisticModule(
  client: DynamoDBClient,
  tableName: string,
  ordersTable: string,
  options: IdempotencyModuleOptions = {},
) {
  return {
    imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false }, ...options })],
    controllers: [OptimisticController],
    providers: [OptimisticRuns, { provide: ORDERS_TABLE, useValue: ordersTable }],
  };
}
