import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { ScriptProcess, startScript } from '../support/script-process';
import { createIdempotencyTable } from '../support/table';

const REPLAYED = 'nestjs-dynamodb-idempotency/replayed';
const PROBLEM = 'nestjs-dynamodb-idempotency/problem';

interface ToolResult {
  content: { type: string; text?: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, any>;
}

/**
 * `@Idempotent()` on `@rekog/mcp-nest` tools, called by the official MCP client over Streamable HTTP, with the server
 * in two processes (mcp-app.script.ts) on one table: what an agent that retries sees.
 */
describe('@Idempotent() MCP tools, two server processes', () => {
  const engine = ENGINES.at(-1)!; // DynamoDB Local when the run has it
  let endpoint: string;
  let stopStore: () => Promise<void>;
  let servers: ScriptProcess[] = [];
  let effects: string;
  const clients: Client[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'mcp-effects-'));

  beforeAll(async () => {
    ({ endpoint, stop: stopStore } = await startStore(engine));
    const tableName = uniqueTableName('mcp');
    await createIdempotencyTable(localClient(endpoint), tableName);
    effects = join(dir, `${tableName}.log`);
    writeFileSync(effects, '');
    const env = { DYNAMODB_ENDPOINT: endpoint, IDEMPOTENCY_TABLE: tableName, EFFECTS: effects };
    const script = join(__dirname, 'mcp-app.script.ts');
    servers = await Promise.all([startScript(script, env), startScript(script, env)]);
  });
  afterAll(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
    await Promise.all(servers.map((server) => server.kill()));
    await stopStore();
  });

  const lines = (word: string) =>
    readFileSync(effects, 'utf8')
      .split('\n')
      .filter((line) => line.startsWith(`${word} `));

  /** An agent connected to one server process, as `user` when given (the `x-user` header stands for its token). */
  async function agent(server: ScriptProcess, user?: string): Promise<Client> {
    const { port } = server.ready as { port: number };
    const client = new Client(
      { name: 'test-agent', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: 'auto' } },
    );
    client.setRequestHandler('elicitation/create', async () => ({
      action: 'accept' as const,
      content: { address: '1 Main St' },
    }));
    const headers = user ? { 'x-user': user } : undefined;
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers } }),
    );
    clients.push(client);
    return client;
  }

  const call = (client: Client, name: string, args: Record<string, unknown>) =>
    client.callTool({ name, arguments: args }) as Promise<ToolResult>;

  it('the same call twice, on the two servers: one payment, the second answer its replay, marked in _meta', async () => {
    const [a, b] = await Promise.all([agent(servers[0]), agent(servers[1])]);
    const key = randomUUID();
    const first = await call(a, 'pay', { idempotencyKey: key, amount: 5 });
    const second = await call(b, 'pay', { idempotencyKey: key, amount: 5 });
    expect(first.isError).toBeFalsy();
    expect(first._meta?.[REPLAYED]).toBeUndefined();
    expect(second).toEqual({ ...first, _meta: { ...first._meta, [REPLAYED]: true } });
    expect(lines('pay').filter((line) => line.includes(String(first.structuredContent!.paymentId)))).toHaveLength(1);
  });

  it('a call without a key: an isError result naming the argument to add, and nothing paid', async () => {
    const client = await agent(servers[0]);
    const before = lines('pay').length;
    const result = await call(client, 'pay', { amount: 6 });
    expect(result.isError).toBe(true);
    expect(result.content[0].text).toContain('"idempotencyKey"');
    expect(result._meta?.[PROBLEM]).toMatchObject({ status: 400, type: 'urn:nestjs-dynamodb-idempotency:key-missing' });
    expect(lines('pay')).toHaveLength(before);
  });

  it('tools/list marks the idempotent tools idempotentHint: true', async () => {
    const client = await agent(servers[0]);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => [tool.name, tool.annotations?.idempotentHint])).toEqual(
      expect.arrayContaining([
        ['pay', true],
        ['charge', true],
      ]),
    );
  });

  it('a charge with an elicitation between its steps: charged once, shipped to the answer', async () => {
    const client = await agent(servers[1]);
    const key = randomUUID();
    const result = await call(client, 'charge', { idempotencyKey: key, amount: 9 });
    expect(result.content[0].text).toContain('shipping to 1 Main St');
    const charges = lines('charge').filter((line) => line.startsWith('charge 9 '));
    expect(charges).toHaveLength(1);
  });
});
