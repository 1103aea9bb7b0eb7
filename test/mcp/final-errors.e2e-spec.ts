import { randomUUID } from 'node:crypto';
import { INestApplication } from '@nestjs/common';
import { Payload, RpcException } from '@nestjs/microservices';
import type { Client } from '@modelcontextprotocol/client';
import { McpController, Tool } from '@rekog/mcp-nest';
import { z } from 'zod';
import { Idempotent, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { mcpClient, startMcpApp } from '../support/mcp';

let declines = 0;
let failures = 0;

@McpController()
class Tools {
  /** A final error (402: `storeIf` stores it): every retry gets the same `isError` result, the tool runs once. */
  @Tool({ name: 'decline', description: 'd', parameters: z.object({ idempotencyKey: z.string() }) })
  @Idempotent()
  decline(@Payload() _args: unknown) {
    declines += 1;
    throw new RpcException({ status: 402, message: 'card declined' });
  }

  /** An error that is not final (a plain error, masked by Nest): the key is released, a retry runs the tool again. */
  @Tool({ name: 'flaky', description: 'd', parameters: z.object({ idempotencyKey: z.string() }) })
  @Idempotent()
  flaky(@Payload() _args: unknown) {
    failures += 1;
    throw new Error('downstream timed out');
  }
}

interface ToolResult {
  content: { text?: string }[];
  isError?: boolean;
}

/** What a tool's errors become for an agent that retries: a final error replayed as the same result; others run again. */
describe('@Idempotent() MCP tools that fail, two apps on one store', () => {
  let apps: INestApplication[];
  let clients: Client[];

  beforeAll(async () => {
    const repository = new InMemoryIdempotencyRepository();
    apps = [await startMcpApp({ repository }, [Tools]), await startMcpApp({ repository }, [Tools])];
    clients = await Promise.all(apps.map((app) => mcpClient(app)));
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await Promise.all(apps.map((app) => app.close()));
  });

  it('a final error: the same isError result on the retry, the tool run once', async () => {
    const args = { idempotencyKey: randomUUID() };
    const first = (await clients[0].callTool({ name: 'decline', arguments: args })) as ToolResult;
    const retry = (await clients[1].callTool({ name: 'decline', arguments: args })) as ToolResult;
    expect(first).toMatchObject({ isError: true, content: [{ text: 'card declined' }] });
    expect(retry).toEqual(first);
    expect(declines).toBe(1);
  });

  it('an error that is not final: the key released, the retry runs the tool again', async () => {
    const args = { idempotencyKey: randomUUID() };
    const first = (await clients[0].callTool({ name: 'flaky', arguments: args })) as ToolResult;
    const retry = (await clients[1].callTool({ name: 'flaky', arguments: args })) as ToolResult;
    expect(first.isError).toBe(true);
    expect(retry.isError).toBe(true);
    expect(failures).toBe(2);
  });
});
