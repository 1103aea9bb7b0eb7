import { randomUUID } from 'node:crypto';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { DemoProcess, startDemoProcess } from '../support/demo-process';

interface ToolResult {
  content: { type: string; text?: string }[];
  structuredContent?: { id: string };
  _meta?: Record<string, unknown>;
}

/** The demo's MCP tool (`place_order`, at /mcp) on Express and on Fastify: an agent's call sent twice places one order. */
describe.each(['express', 'fastify'])('the demo’s place_order MCP tool (%s)', (platform) => {
  let demo: DemoProcess;
  let agent: Client;

  beforeAll(async () => {
    demo = await startDemoProcess({ PLATFORM: platform });
    agent = new Client({ name: 'demo-agent', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await agent.connect(new StreamableHTTPClientTransport(new URL(`${demo.url}/mcp`)));
  });
  afterAll(async () => {
    await agent?.close();
    await demo?.kill();
  });

  it('the same call twice: one order, listed by GET /orders; the second answer is the first, marked as a replay', async () => {
    const args = { idempotencyKey: randomUUID(), item: `mcp-${platform}`, quantity: 2 };
    const first = (await agent.callTool({ name: 'place_order', arguments: args })) as ToolResult;
    const second = (await agent.callTool({ name: 'place_order', arguments: args })) as ToolResult;
    expect(first.content[0].text).toContain(`2 x mcp-${platform}`);
    expect(second.structuredContent).toEqual(first.structuredContent);
    expect(second._meta?.['nestjs-dynamodb-idempotency/replayed']).toBe(true);
    const orders = (await (await fetch(`${demo.url}/orders`)).json()) as { item: string }[];
    expect(orders.filter((order) => order.item === `mcp-${platform}`)).toHaveLength(1);
  });
});
