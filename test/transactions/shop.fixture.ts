import { Body, Controller, Inject, Injectable, Param, Post } from '@nestjs/common';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  CommitWrite,
  Idempotent,
  IdempotencyContext,
  IdempotencyModule,
  IdempotencyModuleOptions,
} from 'nestjs-dynamodb-idempotency';

export const ORDERS_TABLE = Symbol('ORDERS_TABLE');

/** How often the handler ran, what it saw, and gates a test opens to let a parked run finish. */
@Injectable()
export class ShopRuns {
  runs = 0;
  readonly derivedKeys: string[] = [];
  readonly claimTokens: string[] = [];
  readonly gates = new Map<number, () => void>();
}

/**
 * `POST /shop/orders/:id` puts the order `id` (with `attribute_not_exists(id)`) through `commitWith`; `park: true`
 * holds the handler until the test opens its gate; `extraWrites` adds that many more writes; `padding` bytes of
 * text make the order large.
 */
@Controller('shop')
export class ShopController {
  constructor(
    private readonly context: IdempotencyContext,
    private readonly shop: ShopRuns,
    @Inject(ORDERS_TABLE) private readonly ordersTable: string,
  ) {}

  @Post('orders/:id')
  @Idempotent({ pendingTtlSeconds: 5 })
  async order(@Param('id') id: string, @Body() body: { park?: boolean; extraWrites?: number; padding?: number }) {
    const run = ++this.shop.runs;
    this.shop.derivedKeys.push(this.context.deriveKey('payment-provider'));
    this.shop.claimTokens.push(this.context.claimToken);
    if (body.park) await new Promise<void>((resolve) => this.shop.gates.set(run, resolve));
    const put = (orderId: string): CommitWrite => ({
      Put: {
        TableName: this.ordersTable,
        Item: { id: orderId, run, padding: 'x'.repeat(body.padding ?? 0) },
        ConditionExpression: 'attribute_not_exists(id)',
      },
    });
    this.context.commitWith(
      put(id),
      ...Array.from({ length: body.extraWrites ?? 0 }, (_, i) => put(`${id}-extra-${i}`)),
    );
    return { id, run };
  }
}

export function shopModule(
  client: DynamoDBClient,
  tableName: string,
  ordersTable: string,
  options: IdempotencyModuleOptions = {},
) {
  return {
    imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false }, ...options })],
    controllers: [ShopController],
    providers: [ShopRuns, { provide: ORDERS_TABLE, useValue: ordersTable }],
  };
}
