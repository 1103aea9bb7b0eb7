import { setTimeout as sleep } from 'node:timers/promises';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import {
  checkIdempotencyTable,
  DynamoDbIdempotencyRepository,
  IdempotencyHealthIndicator,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { runTableCli } from '../../libs/idempotency/src/cli/run-cli';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { freePort } from '../support/free-port';
import { createIdempotencyTable } from '../support/table';

describe('table check and health indicator', () => {
  let dynamo: Dynalite;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(() => dynamo.stop());

  it("passes the key schema of a created table but fails on dynalite's TTL, saying why", async () => {
    const tableName = uniqueTableName();
    await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
    const check = await checkIdempotencyTable(localClient(dynamo.endpoint), tableName);
    expect(check.ok).toBe(false);
    expect(check.findings).toEqual([
      'ok: key schema is pk (S, HASH)',
      'ok: table is ACTIVE',
      'ok: the index of keys in flight in_flight is ACTIVE',
      expect.stringMatching(/^FAIL: TTL is DISABLED, expected ENABLED on expires_at \(dynalite cannot/),
    ]);
  });

  it('fails a table with the wrong key schema, and a missing table', async () => {
    const client = localClient(dynamo.endpoint);
    const tableName = uniqueTableName();
    await client.send(
      new CreateTableCommand({
        TableName: tableName,
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    expect((await checkIdempotencyTable(client, tableName)).findings[0]).toMatch(
      /^FAIL: its key is id \(S, HASH\); the module is configured for pk \(S, HASH\)/,
    );
    const missing = await checkIdempotencyTable(client, 'no_such_table');
    expect(missing).toEqual({
      ok: false,
      findings: ['FAIL: table no_such_table cannot be described (ResourceNotFoundException)'],
    });
  });

  it('reports the store up, and down with the DynamoDB error code when the table is missing', async () => {
    const client = localClient(dynamo.endpoint);
    const tableName = uniqueTableName();
    await createIdempotencyTable(client, tableName);
    const up = await new IdempotencyHealthIndicator(
      new DynamoDbIdempotencyRepository({ client, tableName }),
    ).isHealthy();
    expect(up).toEqual({ idempotency_store: { status: 'up', latencyMs: expect.any(Number) } });
    const down = await new IdempotencyHealthIndicator(
      new DynamoDbIdempotencyRepository({ client, tableName: 'missing' }),
    ).isHealthy('store');
    expect(down).toEqual({
      store: { status: 'down', dynamo_error_code: 'ResourceNotFoundException', message: expect.any(String) },
    });
    expect(await new IdempotencyHealthIndicator(new InMemoryIdempotencyRepository()).isHealthy()).toMatchObject({
      idempotency_store: { status: 'up' },
    });
  });
});

describe('the table CLI (npm run table:create / table:check)', () => {
  let dynamo: Dynalite;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(() => dynamo.stop());

  async function cli(...argv: string[]) {
    const lines: string[] = [];
    const code = await runTableCli(argv, { log: (line) => lines.push(line), error: (line) => lines.push(line) });
    return { code, output: lines.join('\n') };
  }

  it('check fails on a missing table, create makes it, check then fails only on TTL (dynalite)', async () => {
    const table = uniqueTableName();
    const where = ['--endpoint', dynamo.endpoint, '--table', table];
    expect(await cli('table:check', ...where)).toMatchObject({
      code: 1,
      output: expect.stringContaining('ResourceNotFoundException'),
    });
    expect(await cli('table:create', ...where)).toMatchObject({
      code: 0,
      output: expect.stringContaining(`ready: ${table}`),
    });
    const check = await cli('table:check', ...where);
    expect(check.code).toBe(1);
    expect(check.output).toContain('ok: key schema is pk (S, HASH)');
    expect(check.output).toContain('FAIL: TTL is DISABLED');
  });

  it('takes the table and endpoint from the environment', async () => {
    const table = uniqueTableName();
    process.env.IDEMPOTENCY_TABLE = table;
    process.env.DYNAMODB_ENDPOINT = dynamo.endpoint;
    try {
      expect((await cli('table:create')).output).toContain(`ready: ${table} at ${dynamo.endpoint}`);
    } finally {
      delete process.env.IDEMPOTENCY_TABLE;
      delete process.env.DYNAMODB_ENDPOINT;
    }
  });

  it('waits for a local endpoint that starts listening after the command started', async () => {
    const port = await freePort();
    const table = uniqueTableName();
    const endpoint = `http://127.0.0.1:${port}`;
    const created = cli('table:create', '--endpoint', endpoint, '--table', table);
    await sleep(1500); // refused meanwhile: nothing listens yet
    const late = await startDynalite(port);
    try {
      const { code, output } = await created;
      expect(code).toBe(0);
      expect(output).toContain(`${endpoint} refuses connections: waiting up to 30 s for it to start listening`);
      expect(output).toContain(`ready: ${table} at ${endpoint}`);
      const check = await cli('table:check', '--endpoint', endpoint, '--table', table);
      expect(check.output).toContain('ok: key schema is pk (S, HASH)');
    } finally {
      await late.stop();
    }
  });

  it('prints its usage for an unknown command', async () => {
    expect(await cli('drop-everything')).toMatchObject({ code: 2, output: expect.stringContaining('Usage:') });
  });
});
