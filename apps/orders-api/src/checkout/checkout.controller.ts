import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { BadGatewayException, BadRequestException, Body, Controller, Inject, Injectable, Post } from '@nestjs/common';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { createIdempotentClient, IdempotentClient } from 'nestjs-dynamodb-idempotency/client';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';
import { Charge } from './payment-provider.controller';

/** Where the payment provider is: `PAYMENTS_URL`, else this app's own `/payments/charges` (known once it listens). */
@Injectable()
export class PaymentsLink {
  ownUrl = '';
  private client?: IdempotentClient;

  constructor(@Inject(ORDERS_API_CONFIG) private readonly config: OrdersApiConfig) {}

  get payments(): IdempotentClient {
    return (this.client ??= createIdempotentClient({ baseUrl: this.config.paymentsUrl ?? this.ownUrl }));
  }
}

export interface Checkout {
  checkoutId: string;
  item: string;
  amount: number;
  chargeId: string;
  /** How the charge went: whether the provider replayed it (a re-run of this checkout), and in how many attempts. */
  charge: { replayed: boolean; attempts: number };
}

/**
 * A checkout that charges a payment provider through the retrying client. The charge's key is
 * `deriveKey('charge')` of this checkout's record (`{ name: 'charge' }`): when a checkout runs again (its process
 * crashed after the charge, and the retry took its lease over), the provider gets the same key and replays the
 * first charge instead of charging twice.
 */
@Controller('checkouts')
export class CheckoutController {
  constructor(
    private readonly link: PaymentsLink,
    @Inject(ORDERS_API_CONFIG) private readonly config: OrdersApiConfig,
  ) {}

  @Post()
  @Idempotent()
  async checkout(@Body() body: { item?: unknown; amount?: unknown } | undefined): Promise<Checkout> {
    const { item, amount } = body ?? {};
    if (typeof item !== 'string' || item.length === 0 || typeof amount !== 'number' || !(amount >= 1))
      throw new BadRequestException('item must be a non-empty string and amount a positive number of cents');
    const charge = await this.link.payments.request<Charge>('POST', '/payments/charges', {
      name: 'charge',
      body: { amount },
    });
    if (charge.status !== 201) throw new BadGatewayException(`the payment provider answered ${charge.status}`);
    // A simulated slow step after the charge (CHECKOUT_DELAY_MS): the window in which a crash leaves a charge behind.
    if (this.config.checkoutDelayMs > 0) await sleep(this.config.checkoutDelayMs);
    return {
      checkoutId: randomUUID(),
      item,
      amount,
      chargeId: charge.body.chargeId,
      charge: { replayed: charge.replayed, attempts: charge.attempts },
    };
  }
}
