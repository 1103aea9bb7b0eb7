import { Payload } from '@nestjs/microservices';
import { McpController, Tool } from '@rekog/mcp-nest';
import { z } from 'zod';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { newOrder } from './order';
import { OrdersRepository } from './orders.repository';

/**
 * The orders as an MCP tool for agents (`@rekog/mcp-nest`, Streamable HTTP at `/mcp`): `place_order` places one order
 * per idempotency key, however often an agent sends the call again; a replay says so in its `_meta`.
 */
@McpController()
export class OrderTools {
  constructor(private readonly orders: OrdersRepository) {}

  @Tool({
    name: 'place_order',
    description: 'Places an order for an item.',
    parameters: z.object({
      idempotencyKey: z
        .string()
        .min(1)
        .describe('A new unique value (a UUID) for each new order; the same value when retrying this order.'),
      item: z.string().min(1).max(200),
      quantity: z.number().int().positive(),
    }),
  })
  @Idempotent()
  async placeOrder(@Payload() input: { idempotencyKey: string; item: string; quantity: number }) {
    const order = newOrder(input);
    await this.orders.put(order, input.idempotencyKey);
    return {
      content: [{ type: 'text', text: `Order ${order.id} placed: ${order.quantity} x ${order.item}.` }],
      structuredContent: order,
    };
  }
}
