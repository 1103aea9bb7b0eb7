/**
 * An MCP server in a process of its own (started by mcp-tools.e2e-spec.ts): a NestJS app whose `@rekog/mcp-nest`
 * controller has `@Idempotent()` tools, served over Streamable HTTP at `/mcp`, on the table IDEMPOTENCY_TABLE. Each
 * effect appends a line to the EFFECTS file, the one record all processes share. A middleware makes the `x-user`
 * header the caller's principal (`req.user`), as an authentication guard would. Env: DYNAMODB_ENDPOINT,
 * IDEMPOTENCY_TABLE, EFFECTS; the port is sent to the parent over IPC once the app listens.
 */
import { appendFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, Payload } from '@nestjs/microservices';
import { McpContext, McpController, McpStrategy, StreamableHttpTransport, Tool } from '@rekog/mcp-nest';
import { inputRequired } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { Idempotent, IdempotencyContext, IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { localClient } from '../support/dynalite';

const { DYNAMODB_ENDPOINT, IDEMPOTENCY_TABLE, EFFECTS } = process.env;
const effect = (line: string) => appendFileSync(EFFECTS!, `${line} ${process.pid}\n`);

const idempotencyKey = z
  .string()
  .describe('A new unique value (a UUID) for each new payment; the same value when retrying this payment.');

@McpController()
class PaymentTools {
  constructor(private readonly idempotency: IdempotencyContext) {}

  @Tool({
    name: 'pay',
    description: 'Pays an amount once per idempotency key.',
    // Optional in the schema, so that a key may also come in _meta or the Idempotency-Key header.
    parameters: z.object({
      idempotencyKey: idempotencyKey.optional(),
      amount: z.number(),
      delayMs: z.number().optional(),
    }),
  })
  @Idempotent({ waitMs: 10_000 })
  async pay(@Payload() args: { amount: number; delayMs?: number }) {
    if (args.delayMs) await sleep(args.delayMs);
    const paymentId = randomUUID();
    effect(`pay ${args.amount} ${paymentId}`);
    return {
      content: [{ type: 'text', text: `Paid ${args.amount} (${paymentId}).` }],
      structuredContent: { paymentId },
    };
  }

  /** Books a seat; a duplicate that comes while the first runs is answered in-flight at once (no waitMs). */
  @Tool({
    name: 'book',
    description: 'Books a seat once per idempotency key.',
    parameters: z.object({ idempotencyKey, seat: z.string(), delayMs: z.number().optional() }),
  })
  @Idempotent()
  async book(@Payload() args: { seat: string; delayMs?: number }) {
    if (args.delayMs) await sleep(args.delayMs);
    effect(`book ${args.seat}`);
    return { seat: args.seat, bookedBy: process.pid };
  }

  /** A receipt with a function member (a formatter): JSON sends the data, and leaves the function out. */
  @Tool({
    name: 'receipt',
    description: 'Issues a receipt once per idempotency key.',
    parameters: z.object({ idempotencyKey, amount: z.number() }),
  })
  @Idempotent()
  async receipt(@Payload() args: { amount: number }) {
    const receiptId = randomUUID();
    effect(`receipt ${args.amount} ${receiptId}`);
    return { receiptId, amount: args.amount, format: () => `${receiptId}: ${args.amount}` };
  }

  /** Charges, asks the user (an elicitation, a multi round-trip request) where to ship, then ships. */
  @Tool({
    name: 'charge',
    description: 'Charges an amount, then asks where to ship.',
    parameters: z.object({ idempotencyKey, amount: z.number() }),
  })
  @Idempotent()
  async charge(@Payload() args: { amount: number }, @Ctx() context: McpContext) {
    const chargeId = await this.idempotency.step('charge', async () => {
      const id = randomUUID();
      effect(`charge ${args.amount} ${id}`);
      return id;
    });
    const answers = (context.getArgByIndex(4) as { mcpReq?: { inputResponses?: Record<string, any> } } | undefined)
      ?.mcpReq?.inputResponses;
    const address = answers?.address?.content?.address as string | undefined;
    if (!address) {
      return {
        ...inputRequired({
          inputRequests: {
            address: inputRequired.elicit({
              message: 'Where should we ship it?',
              requestedSchema: { type: 'object', properties: { address: { type: 'string' } }, required: ['address'] },
            }),
          },
        }),
        content: [],
      };
    }
    await this.idempotency.step('ship', async () => effect(`ship ${chargeId} ${address}`));
    return { content: [{ type: 'text', text: `Charged ${args.amount} (${chargeId}), shipping to ${address}.` }] };
  }
}

const mcp = new McpStrategy({ name: 'payments', version: '1.0.0', transports: [new StreamableHttpTransport()] });

@Module({
  imports: [
    IdempotencyModule.forRoot({
      client: localClient(DYNAMODB_ENDPOINT!),
      tableName: IDEMPOTENCY_TABLE!,
      replayCache: { enabled: false },
    }),
  ],
  controllers: [PaymentTools],
})
class McpAppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create(McpAppModule, { logger: ['warn'] });
  app.use((request: { headers: Record<string, string>; user?: unknown }, _response: unknown, next: () => void) => {
    if (request.headers['x-user']) request.user = { sub: request.headers['x-user'] };
    next();
  });
  mcp.setHttpAdapter(app.getHttpAdapter());
  app.connectMicroservice({ strategy: mcp });
  await app.startAllMicroservices();
  await app.listen(0, '127.0.0.1');
  process.send!({ port: (app.getHttpServer().address() as { port: number }).port });
}

void main();
