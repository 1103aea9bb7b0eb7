import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { Controller, Headers, Logger, Post } from '@nestjs/common';
import { Idempotent, IdempotencyModule, ProblemType, TableLayoutOptions } from 'nestjs-dynamodb-idempotency';
import { runCli } from '../../libs/idempotency/src/cli/run-cli';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { RunsByKey } from '../support/runs-by-key';
import { appItemLikeARecord, createIdempotencyTable } from '../support/table';

/**
 * The operator's commands find every key the module writes, and touch nothing else (issue 42 §5): a numeric scope, a
 * fixed partitionKeyValue, a single-table layout without a key prefix whose other items carry attributes named like the
 * module's, a layout given wrong. The CLI runs in this process (`runCli`, what the binary runs), its output captured.
 */
const layout: TableLayoutOptions = { keySchema: { partitionKey: 'PK', sortKey: 'SK' } };

@Controller('orders')
class OrdersController {
  constructor(private readonly runs: RunsByKey) {}

  @Post()
  @Idempotent({
    // An auto-increment user id: a number. `object` stands for a scope function that returns something unusable.
    scope: (_context, request) =>
      request.headers['x-user'] === 'object' ? ({} as never) : Number(request.headers['x-user']),
  })
  create(@Headers('idempotency-key') key: string) {
    this.runs.count(key);
    return { order: key, run: RunsByKey.of(key) };
  }
}

@Controller('carts')
class CartsController {
  @Post()
  @Idempotent({ partitionKeyValue: 'SHOP' })
  create(@Headers('idempotency-key') key: string) {
    return { cart: key };
  }
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const code = await runCli(args, { log: (line) => stdout.push(line), error: (line) => stderr.push(line) });
  return { code, stdout: stdout.join('\n'), stderr: stderr.join('\n') };
}

describe('the admin finds every key the module writes, and never touches what is not its own', () => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let app: TestApp;
  let tableName: string;
  let flags: string[];
  const appItems = {
    // The app's own order, with attributes named exactly like the module's: "pending", long expired.
    order: appItemLikeARecord('CUSTOMER#7', 'ORDER#1'),
    // An item with a key of the module's shape whose attributes do not parse (a time written as text).
    garbled: {
      ...appItemLikeARecord('CUSTOMER#7', recordKey('POST /orders', 'x', 'garbled')),
      pending_since: { S: 'yesterday' },
    },
  };

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    tableName = uniqueTableName('admin_keys');
    await createIdempotencyTable(client, tableName, layout);
    for (const Item of Object.values(appItems)) await client.send(new PutItemCommand({ TableName: tableName, Item }));
    const config = join(tmpdir(), `${tableName}.json`);
    writeFileSync(config, JSON.stringify({ tableName, ...layout }));
    flags = ['--config', config, '--endpoint', dynamo.endpoint, '--region', 'us-east-1'];
    app = await startApp(
      'express',
      {
        imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false }, ...layout })],
        controllers: [OrdersController, CartsController],
        providers: [RunsByKey],
      },
      { realTime: true },
    );
  });
  afterAll(async () => {
    await app.close();
    client.destroy();
    await dynamo.stop();
  });

  const order = (key: string, user: string) =>
    post(`${app.url}/orders`, {}, { 'Idempotency-Key': key, 'x-user': user });

  it('a numeric scope enters the record key as its digits: keys:inspect --scope 42 finds the record', async () => {
    expect((await order('numeric-1', '42')).status).toBe(201);
    const found = await cli([
      'keys:inspect',
      '--route',
      'POST /orders',
      '--key',
      'numeric-1',
      '--scope',
      '42',
      ...flags,
    ]);
    expect(found.code).toBe(0);
    expect(found.stdout).toMatch(/status: COMPLETED/);
  });

  it('a scope function that returns neither a string nor a number is a 500 scope-failed, the handler not run', async () => {
    const refused = await order('object-scope', 'object');
    expect(refused.status).toBe(500);
    expect(JSON.parse(refused.text)).toMatchObject({ type: ProblemType.scopeFailed });
    expect(RunsByKey.of('object-scope')).toBe(0);
  });

  it('a fixed partitionKeyValue: --partition, or partitionKeyValue in --config, finds the record', async () => {
    await post(`${app.url}/carts`, {}, { 'Idempotency-Key': 'cart-1' });
    const select = ['--route', 'POST /carts', '--key', 'cart-1'];
    expect((await cli(['keys:inspect', ...select, ...flags])).code).toBe(1); // the scope's partition: not there
    expect((await cli(['keys:inspect', ...select, '--partition', 'SHOP', ...flags])).code).toBe(0);
    const config = join(tmpdir(), `${tableName}-shop.json`);
    writeFileSync(config, JSON.stringify({ tableName, ...layout, partitionKeyValue: 'SHOP' }));
    const withConfig = ['--config', config, '--endpoint', dynamo.endpoint, '--region', 'us-east-1'];
    expect((await cli(['keys:inspect', ...select, ...withConfig])).code).toBe(0);
    const listed = await cli(['keys:list', '--partition', 'SHOP', '--json', ...flags]);
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ key: recordKey('POST /carts', undefined, 'cart-1'), partition: 'SHOP' }),
    ]);
  });

  it("lists only the module's records, by scope too, without a key prefix; the app's items are never listed", async () => {
    await order('listed-1', '7');
    const all = await cli(['keys:list', '--json', ...flags]);
    expect(all.code).toBe(0);
    const keys = (JSON.parse(all.stdout) as { key: string }[]).map((record) => record.key);
    expect(keys).toContain(recordKey('POST /orders', '7', 'listed-1'));
    expect(keys).not.toContain('ORDER#1');
    expect(keys).not.toContain(appItems.garbled.SK.S);
    const byScope = await cli(['keys:list', '--scope', '7', '--json', ...flags]);
    expect(byScope.code).toBe(0);
    expect((JSON.parse(byScope.stdout) as { key: string }[]).map((record) => record.key)).toEqual([
      recordKey('POST /orders', '7', 'listed-1'),
    ]);
    const none = await cli(['keys:list', '--status', 'FAILED', ...flags]);
    expect(none).toMatchObject({ code: 1, stdout: '', stderr: 'no records' });
  });

  it("reconcile rewrites none of the app's items, even one that looks like a stuck record", async () => {
    // The command logs to stderr as JSON (stdout is its result): kept here, and the logger set back afterwards.
    const logged: string[] = [];
    const stderr = jest
      .spyOn(process.stderr, 'write')
      .mockImplementation((chunk) => (logged.push(String(chunk)), true));
    const swept = await cli(['reconcile', '--json', ...flags]).finally(() => {
      stderr.mockRestore();
      Logger.overrideLogger(false);
    });
    expect(swept.code).toBe(0);
    // The item with a record's key whose attributes do not parse is skipped, and said so; the sweep is reported.
    expect(logged.join('')).toContain('"msg":"skipped an item that has a record key but does not parse as a record"');
    expect(logged.join('')).toContain('"msg":"sweep done"');
    for (const item of Object.values(appItems)) {
      const { Item } = await client.send(
        new GetItemCommand({ TableName: tableName, Key: { PK: item.PK, SK: item.SK }, ConsistentRead: true }),
      );
      expect(Item).toEqual(item);
    }
  });

  it('a layout that is not the table’s exits 2 naming both key schemas, before reading anything', async () => {
    const wrong = ['--table', tableName, '--endpoint', dynamo.endpoint, '--region', 'us-east-1'];
    const listed = await cli(['keys:list', ...wrong]);
    expect(listed.code).toBe(2);
    expect(listed.stderr).toContain(
      'its key is PK (S, HASH), SK (S, RANGE); the module is configured for pk (S, HASH)',
    );
    const missing = await cli(['keys:inspect', '--record-key', 'x', '--table', 'no_such_table', ...wrong.slice(2)]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/does not exist.*table:create --table no_such_table/);
    expect(missing.stderr).toMatch(/one database per region and access key/);
  });

  it('"no record" is exit 1 with hints; a key the module refuses is a usage error; --help goes to stdout', async () => {
    const absent = await cli([
      'keys:inspect',
      '--route',
      'POST /orders/',
      '--key',
      'never-sent',
      '--scope',
      '1',
      ...flags,
    ]);
    expect(absent.code).toBe(1);
    expect(absent.stdout).toBe('no record for this key');
    expect(absent.stderr).toMatch(/--scope[\s\S]*no trailing slash[\s\S]*--partition/);
    for (const key of ['', 'k'.repeat(256), 'a\u0007b']) {
      const refused = await cli(['keys:locate', '--route', 'POST /orders', `--key=${key}`, ...flags]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(
        /--key: Invalid idempotency key: the key (is empty|is longer than 255|contains control)/,
      );
    }
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: nestjs-dynamodb-idempotency <command>/);
    expect(help.stderr).toBe('');
  });
});
