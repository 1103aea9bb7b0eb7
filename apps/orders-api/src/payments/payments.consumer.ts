import { randomUUID } from 'node:crypto';
import { Controller } from '@nestjs/common';
import { EventPattern, MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { OrdersRepository } from '../orders/orders.repository';

/** A payment event, delivered at least once: the same `messageId` may arrive again. */
export interface OrderPaid {
  messageId: string;
  orderId: string;
  amount: number;
}

export interface QuoteRequest {
  requestId: string;
  item: string;
  quantity: number;
}

/**
 * The demo's message consumer (TCP transport, in the same process as the HTTP API). A redelivered message does
 * not run its handler twice: the key is the message's own id.
 */
@Controller()
export class PaymentsConsumer {
  constructor(private readonly orders: OrdersRepository) {}

  /** Records a payment; `payments` on the order counts how often this ran, so a redelivery would show. */
  @EventPattern('order.paid')
  @Idempotent({ key: (message: OrderPaid) => message?.messageId, waitMs: 5000 })
  async onOrderPaid(@Payload() message: OrderPaid): Promise<void> {
    await this.orders.recordPayment(message.orderId, message.amount);
  }

  /** Request/response: the same requestId gets the same quote back, however often it is sent. */
  @MessagePattern('order.quote')
  @Idempotent({ key: (request: QuoteRequest) => request?.requestId })
  quote(@Payload() request: QuoteRequest) {
    // A final error (a status storeIf keeps: 410) is replayed to every retry; a 422 is the sender's to fix and retry.
    if (String(request.item).startsWith('discontinued'))
      throw new RpcException({ status: 410, message: `${request.item} is no longer sold` });
    if (!(request.quantity > 0 && request.quantity <= 1000))
      throw new RpcException({ status: 422, message: 'quantity must be 1–1000' });
    return { quoteId: randomUUID(), item: request.item, quantity: request.quantity, total: request.quantity * 10 };
  }
}
