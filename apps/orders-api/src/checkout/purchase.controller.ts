import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  BadGatewayException,
  BadRequestException,
  Body,
  Controller,
  Inject,
  Logger,
  Post,
  ServiceUnavailableException,
} from '@nestjs/common';
import { IdempotencyContext, Idempotent } from 'nestjs-dynamodb-idempotency';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';
import { PaymentsLink } from './checkout.controller';
import { Charge, Receipt } from './payment-provider.controller';

export interface Purchase {
  purchaseId: string;
  item: string;
  amount: number;
  chargeId: string;
  /** When the provider charged: recorded as a `Date` by the charge step, and one again when a retry resumes. */
  chargedAt: string;
  /** The process that ran the charge step (a retry that resumed it names the first one). */
  chargedBy: number;
  receiptId: string;
  /** The steps whose function ran in this process, with their attempt (`charge#1`); resumed steps are not here. */
  ranHere: string[];
}

/**
 * A purchase in two recovery points (`IdempotencyContext.step`): the card is charged, then the receipt is sent, each
 * a call to the payment provider keyed by its step's key. When the process dies between them, the retry takes the
 * lease over, gets the charge recorded by the first process (its id, its `Date`) without charging again, and sends
 * the receipt. When it dies inside the receipt step, the retry sends the receipt again with the same key, and the
 * provider answers with the first receipt.
 */
@Controller('purchases')
export class PurchaseController {
  private readonly logger = new Logger('Purchases');

  constructor(
    private readonly link: PaymentsLink,
    private readonly idempotency: IdempotencyContext,
    @Inject(ORDERS_API_CONFIG) private readonly config: OrdersApiConfig,
  ) {}

  @Post()
  @Idempotent()
  async purchase(@Body() body: { item?: unknown; amount?: unknown } | undefined): Promise<Purchase> {
    const { item, amount } = body ?? {};
    if (typeof item !== 'string' || item.length === 0 || typeof amount !== 'number' || !(amount >= 1))
      throw new BadRequestException('item must be a non-empty string and amount a positive number of cents');
    const ranHere: string[] = [];
    const charge = await this.idempotency.step('charge', async ({ key, attempt }) => {
      ranHere.push(`charge#${attempt}`);
      const answer = await this.link.payments.request<Charge>('POST', '/payments/charges', { key, body: { amount } });
      if (answer.status !== 201) throw new BadGatewayException(`the payment provider answered ${answer.status}`);
      return { chargeId: answer.body.chargeId, chargedAt: new Date(answer.body.chargedAt), chargedBy: process.pid };
    });
    await this.pause('after-charge');
    if (this.config.purchaseFailure === 'after-charge')
      throw new ServiceUnavailableException('PURCHASE_FAIL: a simulated outage after the charge'); // 503: not final
    const receipt = await this.idempotency.step('receipt', async ({ key, attempt }) => {
      ranHere.push(`receipt#${attempt}`);
      const answer = await this.link.payments.request<Receipt>('POST', '/payments/receipts', {
        key,
        body: { chargeId: charge.chargeId },
      });
      if (answer.status !== 201) throw new BadGatewayException(`the payment provider answered ${answer.status}`);
      await this.pause('in-receipt');
      return { receiptId: answer.body.receiptId };
    });
    return {
      purchaseId: randomUUID(),
      item,
      amount,
      chargeId: charge.chargeId,
      chargedAt: charge.chargedAt.toISOString(), // a Date again, also when the charge step was resumed
      chargedBy: charge.chargedBy,
      receiptId: receipt.receiptId,
      ranHere,
    };
  }

  /** PURCHASE_PAUSE: announced, so that a test can crash or freeze the process in it. */
  private async pause(at: 'after-charge' | 'in-receipt'): Promise<void> {
    const pause = this.config.purchasePause;
    if (pause?.at !== at) return;
    this.logger.log(`purchase paused ${at} for ${pause.ms} ms`);
    await sleep(pause.ms);
  }
}
