import { randomUUID } from 'node:crypto';
import { INestApplication } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import type { Client } from '@modelcontextprotocol/client';
import { McpController, Tool } from '@rekog/mcp-nest';
import { z } from 'zod';
import { Idempotent, IdempotencyOutcomeEvent } from 'nestjs-dynamodb-idempotency';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { mcpClient, startMcpApp } from '../support/mcp';
import { createIdempotencyTable } from '../support/table';

const PROBLEM = 'nestjs-dynamodb-idempotency/problem';
let payments = 0;
const events: IdempotencyOutcomeEvent[] = [];

@McpController()
class Tools {
  @Tool({ name: 'pay', description: 'Pays.', parameters: z.object({ idempotencyKey: z.string(), amount: z.number() }) })
  @Idempotent()
  pay(@Payload() args: { amount: number }) {
    payments += 1;
    return { content: [{ type: 'text', text: `paid ${args.amount}` }] };
  }
}

interface ToolResult {
  content: { text?: string }[];
  isError?: boolean;
  _meta?: Record<string, any>;
}

/**
 * An MCP tool whose idempotency store throttles or cannot be reached (a proxy in front of the store): the model gets an
 * `isError` result that says nothing was done and when to retry with the same key, and the tool does not run. The
 * outcome events say `transport: 'mcp'`.
 */
describe('@Idempotent() MCP tool: the store throttled or unavailable, outcome events', () => {
  const engine = ENGINES.at(-1)!;
  let stopStore: () => Promise<void>;
  let proxy: FaultProxy;
  let app: INestApplication;
  let client: Client;

  beforeAll(async () => {
    const store = await startStore(engine);
    stopStore = store.stop;
    const tableName = uniqueTableName('mcp_faults');
    await createIdempotencyTable(localClient(store.endpoint), tableName);
    proxy = await startFaultProxy(store.endpoint);
    const onOutcome = (event: IdempotencyOutcomeEvent) => void events.push(event);
    app = await startMcpApp({ client: localClient(proxy.endpoint), tableName, onOutcome }, [Tools]);
    client = await mcpClient(app);
  });
  afterAll(async () => {
    await client.close();
    await app.close();
    await proxy.stop();
    await stopStore();
  });
  afterEach(() => {
    proxy.mode = 'pass';
  });

  it.each([
    ['throttle', 'store-throttled'],
    ['drop', 'store-unavailable'],
  ] as const)('%s: an isError result with %s, retryAfterSeconds, and no payment', async (mode, slug) => {
    proxy.mode = mode;
    const before = payments;
    const result = (await client.callTool({
      name: 'pay',
      arguments: { idempotencyKey: randomUUID(), amount: 1 },
    })) as ToolResult;
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toMatch(/not processed.*Retry in \d+ seconds with the same idempotency key/s);
    expect(result._meta?.[PROBLEM]).toMatchObject({
      type: `urn:nestjs-dynamodb-idempotency:${slug}`,
      status: 503,
      retryAfterSeconds: expect.any(Number),
    });
    expect(payments).toBe(before);
  });

  it("outcome events say transport 'mcp' and name the tool", async () => {
    const key = randomUUID();
    events.length = 0;
    await client.callTool({ name: 'pay', arguments: { idempotencyKey: key, amount: 2 } });
    await client.callTool({ name: 'pay', arguments: { idempotencyKey: key, amount: 2 } });
    expect(events.map(({ outcome, transport, operation }) => ({ outcome, transport, operation }))).toEqual([
      { outcome: 'executed', transport: 'mcp', operation: 'MCP tool pay' },
      { outcome: 'replayed', transport: 'mcp', operation: 'MCP tool pay' },
    ]);
  });
});
