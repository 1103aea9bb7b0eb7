import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Body, Controller, Get, Inject, NotFoundException, Param, Post, Res } from '@nestjs/common';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';
import { CreateOrderInput, CreateOrderPipe, Order } from './order';
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
  ): Promise<Order> {
    if (this.config.orderProcessingDelayMs > 0) await sleep(this.config.orderProcessingDelayMs); // the "payment" step
    const order: Order = {
      id: randomUUID(),
      item: input.item,
      quantity: input.quantity,
      createdAt: new Date().toISOString(),
    };
    await this.orders.put(order);
    res.header('Location', `/orders/${order.id}`);
    return order;
  }

  @Get()
  async list(): Promise<Order[]> {
    return this.orders.all();
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
