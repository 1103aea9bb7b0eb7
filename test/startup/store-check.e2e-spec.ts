import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Controller, Logger, Post } from '@nestjs/common';
import {
  ensureIdempotencyTable,
  Idempotent,
  IdempotencyModule,
  IdempotencyModuleOptions,
  ProblemType,
} from 'nestjs-dynamodb-idempotency';
import { PLATFORMS, post, startApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';

@Controller('charges')
class ChargesController {
  runs = 0;

  @Post()
  @Idempotent()
  charge() {
    this.runs += 1;
    return { charged: true };
  }
}

/** The module checks its table once, at startup (`DescribeTable`), and says what is wrong and how to fix it. */
describe.each(PLATFORMS)('the startup check of the store on %s', (platform) => {
  let dynamo: Dynalite;
  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(() => dynamo.stop());

  const boot = (options: IdempotencyModuleOptions) =>
    startApp(platform, { imports: [IdempotencyModule.forRoot(options)], controllers: [ChargesController] });

  it('fails startup when the table does not exist, naming it and the command that creates it', async () => {
    const tableName = uniqueTableName('missing');
    await expect(boot({ client: localClient(dynamo.endpoint), tableName })).rejects.toThrow(
      `Idempotency table "${tableName}" (region us-east-1, endpoint ${dynamo.endpoint}): the table does not exist. Create it ` +
        `once: npx nestjs-dynamodb-idempotency table:create --table ${tableName} --region us-east-1 --endpoint ${dynamo.endpoint}, ` +
        `or ensureIdempotencyTable(client, '${tableName}') before the app starts.`,
    );
  });

  it('fails startup when a local endpoint is given without credentials, saying which variables to set', async () => {
    const tableName = uniqueTableName('nocreds');
    await ensureIdempotencyTable(localClient(dynamo.endpoint), tableName, {
      log: () => undefined,
      warn: () => undefined,
    });
    // The SDK's default chain, with nothing to find on this machine (and never the EC2 metadata service).
    const saved = { ...process.env };
    for (const name of [
      'AWS_ACCESS_KEY_ID',
      'AWS_SECRET_ACCESS_KEY',
      'AWS_SESSION_TOKEN',
      'AWS_PROFILE',
      'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
      'AWS_CONTAINER_CREDENTIALS_FULL_URI',
      'AWS_WEB_IDENTITY_TOKEN_FILE',
    ]) {
      delete process.env[name];
    }
    Object.assign(process.env, {
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: '/nonexistent/config',
      AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/credentials',
    });
    try {
      await expect(boot({ clientConfig: { endpoint: dynamo.endpoint, region: 'local' }, tableName })).rejects.toThrow(
        /: no AWS credentials were found\. Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \(any non-empty values for a local endpoint/,
      );
    } finally {
      process.env = saved;
    }
  });

  it.each([
    [
      'another key',
      [{ AttributeName: 'id', AttributeType: 'S' }],
      [{ AttributeName: 'id', KeyType: 'HASH' }],
      'id (S, HASH)',
    ],
    [
      'pk as a number',
      [{ AttributeName: 'pk', AttributeType: 'N' }],
      [{ AttributeName: 'pk', KeyType: 'HASH' }],
      'pk (N, HASH)',
    ],
    [
      'a sort key besides pk',
      [
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'S' },
      ],
      [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      'pk (S, HASH), sk (S, RANGE)',
    ],
  ] as const)('fails startup when the table has %s, saying which', async (_, attributes, keys, described) => {
    const tableName = uniqueTableName('wrongkey');
    await localClient(dynamo.endpoint).send(
      new CreateTableCommand({
        TableName: tableName,
        AttributeDefinitions: [...attributes],
        KeySchema: [...keys],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    await expect(boot({ client: localClient(dynamo.endpoint), tableName })).rejects.toThrow(
      `: its key is ${described}; the module is configured for pk (S, HASH). Set keySchema to the table's keys ` +
        '(partitionKey, sortKey), use another tableName, or create one with table:create.',
    );
  });

  it('with failOnStartup: false starts anyway, answers 500 store-misconfigured while the table is missing, and works once it exists', async () => {
    const tableName = uniqueTableName('later');
    const client: DynamoDBClient = localClient(dynamo.endpoint);
    const errors = jest.spyOn(Logger.prototype, 'error');
    let logged: unknown[][] = [];
    const app = await boot({ client, tableName, failOnStartup: false }).finally(() => {
      logged = [...errors.mock.calls];
      errors.mockRestore();
    });
    try {
      // An operator sees why the first requests fail.
      expect(logged).toContainEqual([
        expect.objectContaining({
          msg: 'the idempotency store cannot be used (failOnStartup: false, starting anyway)',
          error: expect.stringContaining(tableName),
        }),
      ]);
      const before = await post(`${app.url}/charges`, { amount: 1 }, { 'Idempotency-Key': 'k1' });
      expect(before.status).toBe(500);
      expect(before.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(before.text).type).toBe(ProblemType.storeMisconfigured);
      await ensureIdempotencyTable(client, tableName, { log: () => undefined, warn: () => undefined });
      const after = await post(`${app.url}/charges`, { amount: 1 }, { 'Idempotency-Key': 'k1' });
      expect(after.status).toBe(201);
      expect(app.get(ChargesController).runs).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('starts when the table is there', async () => {
    const tableName = uniqueTableName('ready');
    const client = localClient(dynamo.endpoint);
    await ensureIdempotencyTable(client, tableName, { log: () => undefined, warn: () => undefined });
    const app = await boot({ client, tableName });
    await app.close();
  });
});
