// A throwaway MCP server for `npm run test:package`: the packed library beside @rekog/mcp-nest in a fresh app (NestJS
// 12, ESM), one @Idempotent() tool called twice by the official MCP client with one key: one payment, the second
// result the first one's, marked as a replay. Prints `mcp ok`, or throws.
import 'reflect-metadata';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Payload } from '@nestjs/microservices';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpController, McpStrategy, StreamableHttpTransport, Tool } from '@rekog/mcp-nest';
import { z } from 'zod';
import { ensureIdempotencyTable, Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';

let payments = 0;

@McpController()
class PaymentTools {
  @Tool({
    name: 'pay',
    description: 'Pays an amount.',
    parameters: z.object({
      idempotencyKey: z.string().describe('New for each payment; the same when retrying.'),
      amount: z.number(),
    }),
  })
  @Idempotent()
  pay(@Payload() args: { amount: number }) {
    payments += 1;
    return {
      content: [{ type: 'text' as const, text: `paid ${args.amount}` }],
      structuredContent: { payment: payments },
    };
  }
}

const client = new DynamoDBClient({
  endpoint: process.env.DYNAMODB_ENDPOINT,
  region: 'local',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});
const tableName = process.env.IDEMPOTENCY_TABLE!;

@Module({
  imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false } })],
  controllers: [PaymentTools],
})
class AppModule {}

async function main(): Promise<void> {
  await ensureIdempotencyTable(client, tableName);
  const mcp = new McpStrategy({ name: 'payments', version: '1.0.0', transports: [new StreamableHttpTransport()] });
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  mcp.setHttpAdapter(app.getHttpAdapter());
  app.connectMicroservice({ strategy: mcp });
  await app.startAllMicroservices();
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  const agent = new Client({ name: 'package-test', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await agent.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
  const call = () => agent.callTool({ name: 'pay', arguments: { idempotencyKey: 'pay-1', amount: 5 } });
  const first = await call();
  const second = await call();
  const { tools } = await agent.listTools();
  await agent.close();
  await app.close();
  const checks = {
    'the tool ran once': payments === 1,
    'the second result is the first one':
      JSON.stringify(second.structuredContent) === JSON.stringify(first.structuredContent),
    'the second result is marked as a replay': second._meta?.['nestjs-dynamodb-idempotency/replayed'] === true,
    'tools/list says idempotentHint': tools.find((tool) => tool.name === 'pay')?.annotations?.idempotentHint === true,
  };
  const failed = Object.entries(checks).filter(([, ok]) => !ok);
  if (failed.length)
    throw new Error(`failed: ${failed.map(([name]) => name).join(', ')}\n${JSON.stringify([first, second])}`);
  console.log('mcp ok');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
