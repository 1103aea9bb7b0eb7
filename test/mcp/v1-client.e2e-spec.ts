import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { INestApplication } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { McpController, Tool } from '@rekog/mcp-nest';
import { z } from 'zod';
import { Idempotent } from 'nestjs-dynamodb-idempotency';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { startMcpApp } from '../support/mcp';
import { createIdempotencyTable } from '../support/table';

const REPLAYED = 'nestjs-dynamodb-idempotency/replayed';
const PROBLEM = 'nestjs-dynamodb-idempotency/problem';
const payments: string[] = [];

@McpController()
class PaymentTools {
  @Tool({
    name: 'pay',
    description: 'Pays an amount once per idempotency key.',
    parameters: z.object({ idempotencyKey: z.string().optional(), amount: z.number() }),
  })
  @Idempotent()
  pay(@Payload() args: { amount: number }) {
    payments.push(`pay ${args.amount}`);
    return { content: [{ type: 'text', text: `Paid ${args.amount} (#${payments.length}).` }] };
  }
}

interface ToolResult {
  content: { type: string; text?: string }[];
  isError?: boolean;
  _meta?: Record<string, any>;
}

/**
 * The v1 TypeScript client most agents still ship (`@modelcontextprotocol/sdk` 1.x, beside the v2 packages the other
 * MCP suites use), against `@Idempotent()` tools on two apps over one store: what it sees of replays and problems.
 */
describe.each(ENGINES)(
  '@Idempotent() MCP tools called by the v1 client (@modelcontextprotocol/sdk) on %s',
  (engine) => {
    let stop: () => Promise<void>;
    const apps: INestApplication[] = [];
    const clients: Client[] = [];

    beforeAll(async () => {
      const store = await startStore(engine);
      stop = store.stop;
      const tableName = uniqueTableName('mcp-v1');
      await createIdempotencyTable(localClient(store.endpoint), tableName);
      for (let i = 0; i < 2; i++) {
        apps.push(await startMcpApp({ client: localClient(store.endpoint), tableName }, [PaymentTools]));
      }
    });
    afterAll(async () => {
      await Promise.all(clients.splice(0).map((client) => client.close()));
      await Promise.all(apps.map((app) => app.close()));
      await stop();
    });
    beforeEach(() => (payments.length = 0));

    async function client(app: INestApplication): Promise<Client> {
      const { port } = app.getHttpServer().address() as { port: number };
      const connected = new Client({ name: 'v1-agent', version: '1.0.0' });
      await connected.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
      clients.push(connected);
      return connected;
    }
    const call = (agent: Client, args: Record<string, unknown>) =>
      agent.callTool({ name: 'pay', arguments: args }) as Promise<ToolResult>;

    it('the same call on both apps: one payment, the second answer its replay, marked in _meta', async () => {
      const [a, b] = [await client(apps[0]), await client(apps[1])];
      const key = `v1-${engine}-${Date.now()}`;
      const first = await call(a, { idempotencyKey: key, amount: 5 });
      const second = await call(b, { idempotencyKey: key, amount: 5 });
      expect(first.content[0].text).toBe('Paid 5 (#1).');
      expect(second).toEqual({ ...first, _meta: { ...first._meta, [REPLAYED]: true } });
      expect(payments).toEqual(['pay 5']);
    });

    it('no key, or the key with other arguments: an isError result a model reads, nothing paid', async () => {
      const agent = await client(apps[0]);
      const missing = await call(agent, { amount: 6 });
      expect(missing.isError).toBe(true);
      expect(missing._meta?.[PROBLEM]).toMatchObject({ type: 'urn:nestjs-dynamodb-idempotency:key-missing' });
      const key = `v1-other-${engine}-${Date.now()}`;
      await call(agent, { idempotencyKey: key, amount: 7 });
      const other = await call(await client(apps[1]), { idempotencyKey: key, amount: 8 });
      expect(other.isError).toBe(true);
      expect(other._meta?.[PROBLEM]).toMatchObject({ type: 'urn:nestjs-dynamodb-idempotency:fingerprint-mismatch' });
      expect(payments).toEqual(['pay 7']);
    });

    it('tools/list shows the tool idempotentHint: true', async () => {
      const { tools } = await (await client(apps[0])).listTools();
      expect(tools.find(({ name }) => name === 'pay')?.annotations).toMatchObject({ idempotentHint: true });
    });
  },
);
