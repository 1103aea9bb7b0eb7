import { randomUUID } from 'node:crypto';
import { BadRequestException, Body, Controller, Get, Headers, Post, Query } from '@nestjs/common';
import { Idempotent } from 'nestjs-dynamodb-idempotency';

export interface Charge {
  chargeId: string;
  amount: number;
  /** The key the charge came with: a checkout's `deriveKey('charge')`, the same on every run of that checkout. */
  key: string;
  chargedAt: string;
}

export interface Receipt {
  receiptId: string;
  chargeId: string;
  key: string;
}

/**
 * A payment provider, as a second service would be: `POST /payments/charges` is idempotent by its own
 * `Idempotency-Key`, so a caller that sends the same key twice is charged once and gets the first charge back.
 * `GET /payments/charges` lists the charges this process made (each once, however often its key was sent); with
 * `?key=`, those made under that key (what the conformance kit counts: docs/conformance.md).
 */
@Controller('payments/charges')
export class PaymentProviderController {
  private readonly charges: Charge[] = [];

  @Post()
  @Idempotent()
  charge(@Body() body: { amount?: unknown } | undefined, @Headers('idempotency-key') key: string): Charge {
    const amount = body?.amount;
    if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 1)
      throw new BadRequestException('amount must be a positive integer (cents)');
    const charge = { chargeId: randomUUID(), amount, key, chargedAt: new Date().toISOString() };
    this.charges.push(charge);
    return charge;
  }

  @Get()
  list(@Query('key') key?: string): Charge[] {
    return key === undefined ? this.charges : this.charges.filter((charge) => charge.key === key);
  }
}

/**
 * The provider's receipts (`POST /payments/receipts`, idempotent by `Idempotency-Key`): the second step of a purchase.
 * `GET /payments/receipts` lists the receipts this process sent.
 */
@Controller('payments/receipts')
export class ReceiptController {
  private readonly receipts: Receipt[] = [];

  @Post()
  @Idempotent()
  send(@Body() body: { chargeId?: unknown } | undefined, @Headers('idempotency-key') key: string): Receipt {
    const chargeId = body?.chargeId;
    if (typeof chargeId !== 'string' || chargeId.length === 0)
      throw new BadRequestException('chargeId must be a non-empty string');
    const receipt = { receiptId: randomUUID(), chargeId, key };
    this.receipts.push(receipt);
    return receipt;
  }

  @Get()
  list(): Receipt[] {
    return this.receipts;
  }
}
