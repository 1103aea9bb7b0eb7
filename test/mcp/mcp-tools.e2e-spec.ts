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
  async function agent(
    server: ScriptProcess,
    user?: string,
    extraHeaders: Record<string, string> = {},
  ): Promise<Client> {
    const { port } = server.ready as { port: number };
    const client = new Client(
      { name: 'test-agent', version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: 'auto' } },
    );
    client.setRequestHandler('elicitation/create', async () => ({
      action: 'accept' as const,
      content: { address: '1 Main St' },
    }));
    const headers = { ...extraHeaders, ...(user ? { 'x-user': user } : {}) };
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
    expect(lines('charge').filter((line) => line.startsWith('charge 9 '))).toHaveLength(1);
    // Asked again (a retry of the whole call): the completed answer, not a second round.
    expect((await call(client, 'charge', { idempotencyKey: key, amount: 9 }))._meta?.[REPLAYED]).toBe(true);
  });

  it('the input_required answer is not the outcome: the call re-sent with the answer to the other server resumes after the charge', async () => {
    const [a, b] = await Promise.all([agent(servers[0]), agent(servers[1])]);
    const args = { idempotencyKey: randomUUID(), amount: 10 };
    const asked = (await a.callTool({ name: 'charge', arguments: args }, { allowInputRequired: true })) as {
      resultType?: string;
      inputRequests?: Record<string, unknown>;
    };
    expect(asked.resultType).toBe('input_required');
    expect(Object.keys(asked.inputRequests!)).toEqual(['address']);
    const answered = await b.callTool({
      name: 'charge',
      arguments: args,
      inputResponses: { address: { action: 'accept', content: { address: '2 Side St' } } },
    } as never);
    expect((answered as ToolResult).content[0].text).toContain('shipping to 2 Side St');
    const charges = lines('charge').filter((line) => line.startsWith('charge 10 '));
    expect(charges).toHaveLength(1);
    expect(charges[0].endsWith(` ${servers[0].child.pid}`)).toBe(true);
    const ships = lines('ship').filter((line) => line.includes('2 Side St'));
    expect(ships).toHaveLength(1);
    expect(ships[0].endsWith(` ${servers[1].child.pid}`)).toBe(true);
  });

  it('while a call waits for its user’s input, the same key with other arguments is refused, nothing charged; the continuation resumes', async () => {
    const [a, b] = await Promise.all([agent(servers[0]), agent(servers[1])]);
    const key = randomUUID();
    const asked = (await a.callTool(
      { name: 'charge', arguments: { idempotencyKey: key, amount: 11 } },
      { allowInputRequired: true },
    )) as { resultType?: string };
    expect(asked.resultType).toBe('input_required');
    const other = await call(b, 'charge', { idempotencyKey: key, amount: 99 });
    expect(other.isError).toBe(true);
    expect(other._meta?.[PROBLEM]).toMatchObject({ type: 'urn:nestjs-dynamodb-idempotency:fingerprint-mismatch' });
    const answered = (await b.callTool({
      name: 'charge',
      arguments: { idempotencyKey: key, amount: 11 },
      inputResponses: { address: { action: 'accept', content: { address: '3 Elm St' } } },
    } as never)) as ToolResult;
    expect(answered.content[0].text).toContain('Charged 11');
    expect(lines('charge').filter((line) => line.startsWith('charge 99 '))).toEqual([]);
    expect(lines('charge').filter((line) => line.startsWith('charge 11 '))).toHaveLength(1);
  });

  it('a result with a function member: stored as the JSON the client was sent, and replayed as that same answer', async () => {
    const [a, b] = await Promise.all([agent(servers[0]), agent(servers[1])]);
    const key = randomUUID();
    const first = await call(a, 'receipt', { idempotencyKey: key, amount: 12 });
    const second = await call(b, 'receipt', { idempotencyKey: key, amount: 12 });
    expect(first.isError).toBeFalsy();
    expect(JSON.parse(first.content[0].text!)).toEqual({ receiptId: expect.any(String), amount: 12 });
    expect(second).toEqual({ ...first, _meta: { ...first._meta, [REPLAYED]: true } });
    expect(lines('receipt').filter((line) => line.startsWith('receipt 12 '))).toHaveLength(1);
  });

  it('a plain value returned by the tool: the replay is the same CallToolResult, marked', async () => {
    const [a, b] = await Promise.all([agent(servers[0]), agent(servers[1])]);
    const key = randomUUID();
    const first = await call(a, 'book', { idempotencyKey: key, seat: '1A' });
    const second = await call(b, 'book', { idempotencyKey: key, seat: '1A' });
    expect(JSON.parse(first.content[0].text!)).toEqual({ seat: '1A', bookedBy: servers[0].child.pid });
    expect(second).toEqual({ ...first, _meta: { ...first._meta, [REPLAYED]: true } });
  });

  it('a different caller with the same key gets a record of its own; the same caller its replay', async () => {
    const [alice, bob, aliceAgain] = await Promise.all([
      agent(servers[0], 'alice'),
      agent(servers[1], 'bob'),
      agent(servers[1], 'alice'),
    ]);
    const key = randomUUID();
    const forAlice = await call(alice, 'pay', { idempotencyKey: key, amount: 7 });
    const forBob = await call(bob, 'pay', { idempotencyKey: key, amount: 7 });
    const again = await call(aliceAgain, 'pay', { idempotencyKey: key, amount: 7 });
    expect(forBob.structuredContent!.paymentId).not.toEqual(forAlice.structuredContent!.paymentId);
    expect(forBob._meta?.[REPLAYED]).toBeUndefined();
    expect(again.structuredContent).toEqual(forAlice.structuredContent);
    expect(again._meta?.[REPLAYED]).toBe(true);
  });

  it('concurrent duplicates on both servers: one run; the others an in-flight result that says when to retry', async () => {
    const clients = await Promise.all([agent(servers[0]), agent(servers[1]), agent(servers[0]), agent(servers[1])]);
    const key = randomUUID();
    const seat = `seat-${key}`;
    const results = await Promise.all(
      clients.map((client) => call(client, 'book', { idempotencyKey: key, seat, delayMs: 1000 })),
    );
    expect(lines('book').filter((line) => line.startsWith(`book ${seat} `))).toHaveLength(1);
    const refused = results.filter((result) => result.isError);
    expect(results.filter((result) => !result.isError)).toHaveLength(1);
    expect(refused).toHaveLength(3);
    for (const result of refused) {
      expect(result.content[0].text).toMatch(/Retry in \d+ seconds with the same idempotency key/);
      expect(result._meta?.[PROBLEM]).toMatchObject({
        type: 'urn:nestjs-dynamodb-idempotency:in-flight',
        status: 409,
        retryAfterSeconds: expect.any(Number),
      });
    }
  });

  it('a response stream cut mid-call, then the re-issue with a new request id and the same key: one payment, its result', async () => {
    const [a, b] = await Promise.all([agent(servers[0]), agent(servers[1])]);
    const key = randomUUID();
    const cut = new AbortController();
    const first = a.callTool(
      { name: 'pay', arguments: { idempotencyKey: key, amount: 11, delayMs: 1500 } },
      { signal: cut.signal },
    );
    setTimeout(() => cut.abort(), 300);
    await expect(first).rejects.toThrow();
    const reissued = await call(b, 'pay', { idempotencyKey: key, amount: 11, delayMs: 1500 });
    const payments = lines('pay').filter((line) => line.startsWith('pay 11 '));
    expect(payments).toHaveLength(1);
    expect(payments[0]).toContain(String(reissued.structuredContent!.paymentId));
    expect(reissued._meta?.[REPLAYED]).toBe(true);
  });

  it('the key in _meta or in the Idempotency-Key header, when the arguments carry none', async () => {
    const metaKey = randomUUID();
    const client = await agent(servers[0]);
    const byMeta = () =>
      client.callTool({
        name: 'pay',
        arguments: { amount: 12 },
        _meta: { 'idempotency-key': metaKey },
      }) as Promise<ToolResult>;
    const first = await byMeta();
    expect((await byMeta()).structuredContent).toEqual(first.structuredContent);
    const headerKey = randomUUID();
    const [c, d] = await Promise.all([
      agent(servers[0], undefined, { 'idempotency-key': headerKey }),
      agent(servers[1], undefined, { 'idempotency-key': headerKey }),
    ]);
    const third = await call(c, 'pay', { amount: 13 });
    const fourth = await call(d, 'pay', { amount: 13 });
    expect(fourth.structuredContent).toEqual(third.structuredContent);
    expect(fourth._meta?.[REPLAYED]).toBe(true);
    expect(lines('pay').filter((line) => / 1[23] /.test(line))).toHaveLength(2);
  });

  it('the same key with other arguments: an isError result telling the model to use a new key, nothing paid', async () => {
    const client = await agent(servers[0]);
    const key = randomUUID();
    await call(client, 'pay', { idempotencyKey: key, amount: 14 });
    const other = await call(client, 'pay', { idempotencyKey: key, amount: 15 });
    expect(other.isError).toBe(true);
    expect(other.content[0].text).toContain('Use a new key for a new request');
    expect(other._meta?.[PROBLEM]).toMatchObject({ status: 422 });
    expect(lines('pay').filter((line) => line.startsWith('pay 15 '))).toHaveLength(0);
  });
});
