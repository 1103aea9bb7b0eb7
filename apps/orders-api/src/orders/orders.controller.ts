import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Body,
  Controller,
  Get,
  Headers,
  Inject,
  NotFoundException,
  Param,
  Post,
  Query,
  Res,
  StreamableFile,
} from '@nestjs/common';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';
import { CreateOrderInput, CreateOrderPipe, newOrder, Order } from './order';
import { OrdersRepository } from './orders.repository';

@Controller('orders')
export class OrdersController {
  constructor(
    private readonly orders: OrdersRepository,
    @Inject(ORDERS_API_CONFIG) private readonly config: OrdersApiConfig,
  ) {}

  /** Creates an order. A retry with the same Idempotency-Key gets the same order back, never a second one. */
  @Post()
  @Idempotent()
  async create(
    @Body(CreateOrderPipe) input: CreateOrderInput,
    @Res({ passthrough: true }) res: ResponseHeaders,
    @Headers('idempotency-key') key: string,
  ): Promise<Order> {
    if (this.config.orderProcessingDelayMs > 0) await sleep(this.config.orderProcessingDelayMs); // the "payment" step
    const order = newOrder(input);
    await this.orders.put(order, key);
    res.header('Location', `/orders/${order.id}`);
    return order;
  }

  /**
   * Issues a receipt for an order: a binary answer (a PDF), numbered anew each time the handler runs, so a retry
   * shows that it got the first receipt back byte for byte.
   */
  @Post(':id/receipts')
  @Idempotent()
  async receipt(@Param('id') id: string): Promise<StreamableFile> {
    const order = await this.orders.get(id);
    if (!order) throw new NotFoundException(`No order ${id}`);
    const text = `Receipt ${randomUUID()} for order ${order.id}: ${order.quantity} x ${order.item}`;
    const pdf = Buffer.concat([
      Buffer.from('%PDF-1.4\n%\xe2\xe3\xcf\xd3\n', 'latin1'),
      Buffer.from(`% ${text}\n%%EOF\n`),
    ]);
    return new StreamableFile(pdf, { type: 'application/pdf', disposition: `inline; filename="${order.id}.pdf"` });
  }

  /** The orders; with `?key=`, those placed under that Idempotency-Key (what the conformance kit counts). */
  @Get()
  async list(@Query('key') key?: string): Promise<Order[]> {
    return this.orders.all(key);
  }

  @Get(':id')
  async get(@Param('id') id: string): Promise<Order> {
    const order = await this.orders.get(id);
    if (!order) throw new NotFoundException(`No order ${id}`);
    return order;
  }
}

/** What the handler needs of the response: `header()` is both Express's and Fastify's. */
interface ResponseHeaders {
  header(name: string, value: string): unknown;
}
