import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Body, Controller, Get, Inject, NotFoundException, Param, Post, Res, UseFilters } from '@nestjs/common';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';
import { ProblemDetailsFilter } from '../problem-details.filter';
import { CreateOrderInput, CreateOrderPipe, Order } from './order';
import { OrdersRepository } from './orders.repository';

@Controller('orders')
@UseFilters(ProblemDetailsFilter)
export class OrdersController {
  constructor(
    private readonly orders: OrdersRepository,
    @Inject(ORDERS_API_CONFIG) private readonly config: OrdersApiConfig,
  ) {}

  /** Creates an order. A retry with the same Idempotency-Key gets the same order back, never a second one. */
  @Post()
  @Idempotent()
  async create(@Body(CreateOrderPipe) input: CreateOrderInput, @Res({ passthrough: true }) res: { setHeader(name: string, value: string): void }): Promise<Order> {
    if (this.config.orderProcessingDelayMs > 0) await sleep(this.config.orderProcessingDelayMs); // the "payment" step
    const order: Order = { id: randomUUID(), item: input.item, quantity: input.quantity, createdAt: new Date().toISOString() };
    await this.orders.put(order);
    res.setHeader('Location', `/orders/${order.id}`);
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
