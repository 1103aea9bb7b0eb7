import { randomBytes } from 'node:crypto';
import { DynamoDBClient, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { Body, Controller, Post, Res } from '@nestjs/common';
import {
  EncryptionOptions,
  Idempotent,
  IdempotencyModule,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { RunsByKey } from '../support/runs-by-key';
import { PLATFORMS, post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable, scanTable } from '../support/table';

const runsOf = (key: string) => RunsByKey.of(key);

@Controller('cards')
class CardsController {
  constructor(private readonly runs: RunsByKey) {}

  @Post()
  @Idempotent()
  save(
    @Body() body: { key: string; pan: string },
    @Res({ passthrough: true }) res: { header(name: string, value: string): unknown },
  ) {
    this.runs.count(body.key);
    res.header('Location', `/cards/secret-location-${body.key}`);
    return { key: body.key, pan: body.pan, holder: 'ALICE SECRETHOLDER' };
  }
}

const newKeyMaterial = () => randomBytes(32);

describe.each(PLATFORMS)('encryption at rest on %s', (platform) => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let tableName: string;
  const apps: TestApp[] = [];
  let keys = 0;
  const newKey = () => `sealed-${platform}-${++keys}`;

  /** An instance without replay cache: every duplicate reads the record from dynalite. */
  const boot = async (encryption?: EncryptionOptions) => {
    const app = await startApp(platform, {
      imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false }, encryption })],
      controllers: [CardsController],
      providers: [RunsByKey],
    });
    apps.push(app);
    return app;
  };
  const save = (app: TestApp, key: string) =>
    post(`${app.url}/cards`, { key, pan: '4242424242424242' }, { 'Idempotency-Key': key });
  const itemOf = async (key: string) => {
    const items = (await scanTable(client, tableName)).map(({ item }) => item);
    return items.filter((item) => item.status === 'COMPLETED').find((item) => item.pk === pkOf.get(key));
  };
  /** The partition key of each test key, learned from the one record a first request adds. */
  const pkOf = new Map<string, string>();
  const firstRequest = async (app: TestApp, key: string) => {
    const before = new Set((await scanTable(client, tableName)).map(({ item }) => item.pk));
    const response = await save(app, key);
    const added = (await scanTable(client, tableName)).map(({ item }) => item.pk).filter((pk) => !before.has(pk));
    expect(added).toHaveLength(1);
    pkOf.set(key, added[0]);
    return response;
  };

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    tableName = uniqueTableName('sealed');
    await createIdempotencyTable(client, tableName);
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await dynamo.stop();
  });

  it('stores neither the body nor the headers in the clear, and replays them exactly from another instance', async () => {
    const secret = newKeyMaterial();
    const [a, b] = [await boot({ keys: [secret] }), await boot({ keys: [secret.toString('base64')] })];
    const key = newKey();
    const first = await firstRequest(a, key);
    const item = await itemOf(key);
    const stored = JSON.parse(item!.response as string);
    expect(Object.keys(stored).sort()).toEqual(['headers', 'sealed', 'statusCode']);
    expect(stored.headers).toEqual({});
    expect(item!.response).not.toMatch(/4242|SECRETHOLDER|secret-location/);

    const retry = await save(b, key);
    expect(retry.status).toBe(201);
    expect(retry.text).toBe(first.text);
    expect(retry.headers.get('location')).toBe(`/cards/secret-location-${key}`);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(runsOf(key)).toBe(1);
  });

  it('rotates: a new first key seals, the old one still opens; once it is removed, its records fail closed (500, never re-run)', async () => {
    const [old, current] = [newKeyMaterial(), newKeyMaterial()];
    const before = await boot({ keys: [old] });
    const during = await boot({ keys: [current, old] });
    const after = await boot({ keys: [current] });
    const sealedWithOld = newKey();
    const sealedWithCurrent = newKey();
    await firstRequest(before, sealedWithOld);
    await firstRequest(during, sealedWithCurrent);

    expect((await save(during, sealedWithOld)).headers.get('idempotent-replayed')).toBe('true');
    expect((await save(after, sealedWithCurrent)).headers.get('idempotent-replayed')).toBe('true');
    const logs = new CapturedLogs();
    logs.start();
    const unreadable = await save(after, sealedWithOld).finally(() => logs.stop());
    expect(logs.at('error')).toEqual([
      {
        msg: 'stored response unreadable; answering 500 record-unreadable, never re-running',
        key: pkOf.get(sealedWithOld),
        reason: expect.stringMatching(
          /^it was sealed with a key that is not in encryption\.keys \(key id [0-9a-f]+\)$/,
        ),
      },
    ]);
    expect(unreadable.status).toBe(500);
    expect(unreadable.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(unreadable.text)).toMatchObject({
      type: 'urn:nestjs-dynamodb-idempotency:record-unreadable',
      status: 500,
    });
    expect(runsOf(sealedWithOld)).toBe(1);
    expect((await itemOf(sealedWithOld))?.status).toBe('COMPLETED');
  });

  it('refuses a sealed response copied under another key, and a tampered one', async () => {
    const secret = newKeyMaterial();
    const app = await boot({ keys: [secret] });
    const [source, target, tampered] = [newKey(), newKey(), newKey()];
    for (const key of [source, target, tampered]) await firstRequest(app, key);
    const setResponse = (key: string, response: string) =>
      client.send(
        new UpdateItemCommand({
          TableName: tableName,
          Key: { pk: { S: pkOf.get(key)! } },
          UpdateExpression: 'SET #r = :r',
          ExpressionAttributeNames: { '#r': 'response' },
          ExpressionAttributeValues: { ':r': { S: response } },
        }),
      );
    await setResponse(target, (await itemOf(source))!.response as string);
    const flipped = JSON.parse((await itemOf(tampered))!.response as string);
    const bytes = Buffer.from(flipped.sealed, 'base64');
    bytes[bytes.length - 1] ^= 1;
    await setResponse(tampered, JSON.stringify({ ...flipped, sealed: bytes.toString('base64') }));

    for (const key of [target, tampered]) {
      const retry = await save(app, key);
      expect(retry.status).toBe(500);
      expect(JSON.parse(retry.text).type).toBe('urn:nestjs-dynamodb-idempotency:record-unreadable');
      expect(runsOf(key)).toBe(1);
    }
    expect((await save(app, source)).status).toBe(201);
  });

  it('treats a record stored in the clear as unreadable, unless allowPlaintext (a rollout)', async () => {
    const secret = newKeyMaterial();
    const plain = await boot();
    const strict = await boot({ keys: [secret] });
    const rollout = await boot({ keys: [secret], allowPlaintext: true });
    const key = newKey();
    const first = await firstRequest(plain, key);
    expect((await save(strict, key)).status).toBe(500);
    const replay = await save(rollout, key);
    expect(replay.text).toBe(first.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(runsOf(key)).toBe(1);
  });
});

describe('encryption options', () => {
  it.each([
    [{ keys: [] }, /encryption\.keys must list at least one 32-byte key/],
    [{ keys: [randomBytes(16)] }, /encryption\.keys\[0\] must be 32 bytes/],
    [{ keys: [randomBytes(32), 'c2hvcnQ='] }, /encryption\.keys\[1\] must be 32 bytes/],
  ])('fail startup for %p', async (encryption, message) => {
    await expect(
      startApp('express', {
        imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository(), encryption })],
      }),
    ).rejects.toThrow(message);
  });
});
