import { randomBytes } from 'node:crypto';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { Body, Controller, InternalServerErrorException, Post } from '@nestjs/common';
import {
  DynamoDbIdempotencyRepository,
  IdempotencyContext,
  Idempotent,
  IdempotencyModule,
  IdempotencyService,
  ProblemType,
} from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, uniqueTableName } from '../support/dynalite';
import { Engine, ENGINES, startStore } from '../support/engines';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';

/**
 * A request's steps and response near DynamoDB's 400 KB item limit, counted as DynamoDB counts an item (the steps'
 * names included): on a first run and on a resumed one the key is COMPLETED (its response stored without its body
 * when the item has no room for it), the handler runs once, and too many steps are refused by the module's limit,
 * before DynamoDB refuses anything.
 */
const STEPS = 180;
/** A name of 255 characters (the longest the API takes) for each line item. */
const lineItem = (i: number) => `line-item-${String(i).padStart(3, '0')}-`.padEnd(255, 'x');

class Runs {
  static readonly steps = new Map<string, number>();
  static readonly handler = new Map<string, number>();
  static count(map: Map<string, number>, key: string): void {
    map.set(key, (map.get(key) ?? 0) + 1);
  }
}

@Controller('baskets')
class BasketsController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  /**
   * A step per line item (180 names of 255 characters), then a response of about 365 KB stored (random bytes do not
   * compress). `failOnce`: a 500 after the steps, on the first run (not final: the retry resumes them).
   */
  @Post()
  @Idempotent()
  async checkout(@Body() body: { id: string; failOnce?: boolean }) {
    Runs.count(Runs.handler, body.id);
    for (let i = 0; i < STEPS; i++) {
      await this.idempotency.step(lineItem(i), () => (Runs.count(Runs.steps, body.id), i));
    }
    if (body.failOnce && Runs.handler.get(body.id) === 1) throw new InternalServerErrorException('the printer jammed');
    return { id: body.id, receipt: randomBytes(363_000).toString('base64') };
  }
}

describe.each(ENGINES)('steps and a response near the item limit on %s', (engine: Engine) => {
  let store: Dynalite;
  let client: DynamoDBClient;
  let tableName: string;
  let app: TestApp;
  let ids = 0;
  const newId = () => `basket-${engine}-${process.pid}-${++ids}`;

  beforeAll(async () => {
    store = await startStore(engine);
    client = localClient(store.endpoint);
    tableName = uniqueTableName('stepsizes');
    await createIdempotencyTable(client, tableName);
    app = await startApp(
      'express',
      {
        imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false } })],
        controllers: [BasketsController],
      },
      { realTime: true },
    );
  }, 60_000);
  afterAll(async () => {
    await app.close();
    client.destroy();
    await store.stop();
  });

  const record = async (id: string) => {
    const pk = recordKey('POST /baskets', undefined, id);
    const { Item } = await client.send(
      new GetItemCommand({ TableName: tableName, Key: { pk: { S: pk } }, ConsistentRead: true }),
    );
    return Item && unmarshall(Item);
  };

  /** Completed without its body, never PENDING; a duplicate gets 409 response-not-stored, and nothing runs again. */
  async function expectCompletedWithoutBody(body: { id: string; failOnce?: boolean }): Promise<void> {
    expect((await record(body.id))?.status).toBe('COMPLETED');
    const duplicate = await post(`${app.url}/baskets`, body, { 'Idempotency-Key': body.id });
    expect(duplicate.status).toBe(409);
    expect(JSON.parse(duplicate.text)).toMatchObject({ type: ProblemType.responseNotStored });
  }

  it('completes a first run whose steps take the room of the response: 201, the key COMPLETED, the handler run once', async () => {
    const id = newId();
    const logs = new CapturedLogs();
    logs.start();
    try {
      const first = await post(`${app.url}/baskets`, { id }, { 'Idempotency-Key': id });
      expect(first.status).toBe(201);
      await expectCompletedWithoutBody({ id });
      expect(JSON.stringify(logs.at('warn'))).toContain('stored without its body');
    } finally {
      logs.stop();
    }
    expect([Runs.handler.get(id), Runs.steps.get(id)]).toEqual([1, STEPS]);
  }, 60_000);

  it('completes a resumed run the same way, counting the steps it read back', async () => {
    const id = newId();
    const logs = new CapturedLogs();
    logs.start();
    try {
      const failed = await post(`${app.url}/baskets`, { id, failOnce: true }, { 'Idempotency-Key': id });
      expect(failed.status).toBe(500);
      expect((await record(id))?.status).toBe('FAILED');
      const resumed = await post(`${app.url}/baskets`, { id, failOnce: true }, { 'Idempotency-Key': id });
      expect(resumed.status).toBe(201);
      await expectCompletedWithoutBody({ id, failOnce: true });
    } finally {
      logs.stop();
    }
    expect([Runs.handler.get(id), Runs.steps.get(id)]).toEqual([2, STEPS]);
  }, 60_000);

  it("refuses the step that would take the request's steps past 64 KB, counting names as DynamoDB does", async () => {
    const service = app.get(IdempotencyService);
    const euros = (i: number) => `${i}-`.padEnd(255, '€'); // 3 bytes a character: about 760 bytes a name
    let recorded = 0;
    const many = service.execute({ operation: 'many-steps', key: newId() }, async (context) => {
      for (let i = 0; i < 600; i++) await context.step(euros(i), () => ++recorded);
    });
    await expect(many).rejects.toThrow(RangeError);
    await expect(many).rejects.toThrow(/over the limit of 65536 for all of them/);
    expect(recorded).toBeGreaterThan(70);
    expect(recorded).toBeLessThan(80);
  }, 60_000);

  it.each(engine === 'dynamodb-local' ? ['none', 'an order'] : ['none'])(
    "stores the completion without its body when DynamoDB refuses the item as over 400 KB, whatever the module's count said (commitWith writes: %s)",
    async (given) => {
      // With commitWith writes (DynamoDB Local: transactions), the completion is written again as a transaction of its
      // own (another ClientRequestToken), the writes with it.
      const writes = given === 'none' ? [] : [{ Put: { TableName: tableName, Item: { pk: `order-${newId()}` } } }];
      const repository = new DynamoDbIdempotencyRepository({ client, tableName });
      const key = recordKey('fn under-counted', undefined, newId());
      const claim = await repository.claim({ key, fingerprint: 'f'.repeat(64), leaseSeconds: 60 });
      if (!claim.claimed) throw new Error('not claimed');
      for (let i = 0; i < STEPS; i++) {
        const result = { statusCode: 200, headers: {}, body: i, bodyEncoding: 'typed' as const };
        await repository.recordStep({
          key,
          claimToken: claim.claimToken,
          step: { name: lineItem(i), result, attempt: 1, run: 1 },
        });
      }
      const logs = new CapturedLogs();
      logs.start();
      try {
        // A caller that did not count the steps (stepBytes 0): the response alone fits, the item does not.
        const response = { statusCode: 201, headers: {}, body: { receipt: randomBytes(363_000).toString('base64') } };
        const completed = await repository.complete({
          key,
          claimToken: claim.claimToken,
          response,
          ttlSeconds: 60,
          ...(writes.length ? { writes } : {}),
        });
        expect(completed).toMatchObject({ ok: true });
        expect(JSON.stringify(logs.at('warn'))).toContain(
          'DynamoDB refused the completion as over its 400 KB item limit',
        );
        // The store call's own log names the limit (a transaction's refusal is read from its cancellation reasons).
        if (!writes.length) {
          expect(JSON.stringify(logs.at('error'))).toContain("the record would pass DynamoDB's 400 KB item limit");
        }
        expect(JSON.stringify(logs.at('error'))).not.toContain('key schema');
      } finally {
        logs.stop();
      }
      const stored = await repository.get({ key });
      expect(stored).toMatchObject({ status: 'COMPLETED', response: { statusCode: 201, bodyOmitted: true } });
      expect(stored?.steps).toHaveLength(STEPS);
      for (const { Put } of writes) {
        const { Item } = await client.send(
          new GetItemCommand({ TableName: tableName, Key: { pk: { S: Put.Item.pk } } }),
        );
        expect(Item).toBeDefined(); // committed with the completion
      }
    },
    60_000,
  );
});
