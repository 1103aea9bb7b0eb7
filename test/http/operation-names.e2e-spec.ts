import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Body, Controller, Headers, Post } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { LAYOUTS, LayoutName } from '../support/layouts';
import { RunsByKey } from '../support/runs-by-key';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { createIdempotencyTable, scanTable } from '../support/table';

/**
 * A route refactored between a request and its retry (another path, another version prefix): two app instances on one
 * table, the old release and the new one. With a stable `name` the retry replays; without one it is a new operation.
 */
@Controller('v1/orders')
class OldOrdersController {
  constructor(private readonly runs: RunsByKey) {}

  @Post()
  @Idempotent({ name: 'orders.create' })
  create(@Headers('idempotency-key') key: string, @Body() body: unknown) {
    this.runs.count(key);
    return { order: key, body, release: 'old' };
  }

  @Post('unnamed')
  @Idempotent()
  createUnnamed(@Headers('idempotency-key') key: string) {
    this.runs.count(key);
    return { order: key, release: 'old' };
  }
}

@Controller('v2/purchases')
class NewOrdersController {
  constructor(private readonly runs: RunsByKey) {}

  @Post('new')
  @Idempotent({ name: 'orders.create' })
  create(@Headers('idempotency-key') key: string, @Body() body: unknown) {
    this.runs.count(key);
    return { order: key, body, release: 'new' };
  }

  @Post('unnamed')
  @Idempotent()
  createUnnamed(@Headers('idempotency-key') key: string) {
    this.runs.count(key);
    return { order: key, release: 'new' };
  }
}

describe.each(Object.keys(LAYOUTS) as LayoutName[])('a stable operation name (`name`), %s layout', (layoutName) => {
  const layout = LAYOUTS[layoutName];
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let tableName: string;
  let before: TestApp;
  let after: TestApp;
  const start = (controller: typeof OldOrdersController | typeof NewOrdersController) =>
    startApp('express', {
      imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false }, ...layout })],
      controllers: [controller],
      providers: [RunsByKey],
    });

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    tableName = uniqueTableName('names');
    await createIdempotencyTable(client, tableName, layout);
    before = await start(OldOrdersController);
    after = await start(NewOrdersController);
  });
  afterAll(async () => {
    await before.close();
    await after.close();
    await dynamo.stop();
  });

  it('replays a retry that reaches the refactored route: same name, same body', async () => {
    const key = `named-${layoutName}`;
    const first = await post(`${before.url}/v1/orders`, { item: 'book' }, { 'Idempotency-Key': key });
    const retry = await post(`${after.url}/v2/purchases/new`, { item: 'book' }, { 'Idempotency-Key': key });
    expect(first.status).toBe(201);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(JSON.parse(retry.text)).toEqual({ order: key, body: { item: 'book' }, release: 'old' });
    expect(RunsByKey.of(key)).toBe(1);
    const records = await scanTable(client, tableName, layout);
    expect(records.filter(({ item }) => item.pk === recordKey('orders.create', undefined, key))).toHaveLength(1);
  });

  it('still answers 422 to a different body under the same name', async () => {
    const key = `named-mismatch-${layoutName}`;
    await post(`${before.url}/v1/orders`, { item: 'book' }, { 'Idempotency-Key': key });
    const retry = await post(`${after.url}/v2/purchases/new`, { item: 'pen' }, { 'Idempotency-Key': key });
    expect(retry.status).toBe(422);
    expect(RunsByKey.of(key)).toBe(1);
  });

  it('without a name, the retry through the new path is a new operation: the handler runs again', async () => {
    const key = `unnamed-${layoutName}`;
    await post(`${before.url}/v1/orders/unnamed`, {}, { 'Idempotency-Key': key });
    const retry = await post(`${after.url}/v2/purchases/unnamed`, {}, { 'Idempotency-Key': key });
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(JSON.parse(retry.text)).toMatchObject({ release: 'new' });
    expect(RunsByKey.of(key)).toBe(2);
    const stored = (await scanTable(client, tableName, layout)).map(({ item }) => item.pk);
    expect(stored).toEqual(
      expect.arrayContaining([
        recordKey('POST /v1/orders/unnamed', undefined, key),
        recordKey('POST /v2/purchases/unnamed', undefined, key),
      ]),
    );
  });
});
