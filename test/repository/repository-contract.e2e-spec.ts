import { randomBytes } from 'node:crypto';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { gunzipSync } from 'node:zlib';
import {
  DynamoDbIdempotencyRepository,
  ensureIdempotencyTable,
  IdempotencyRepository,
  PutCompletedInput,
  TableLayoutOptions,
} from 'nestjs-dynamodb-idempotency';
import {
  describeRepositoryContract,
  InMemoryIdempotencyRepository,
  ManualClock,
} from 'nestjs-dynamodb-idempotency/testing';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { testClock } from '../support/clock';
import { LAYOUTS as LAYOUT_OPTIONS } from '../support/layouts';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { CapturedLogs } from '../support/logs';

/** The contract as users run it, from the published `nestjs-dynamodb-idempotency/testing` entry point. */
describeRepositoryContract('in-memory', async (clock) => new InMemoryIdempotencyRepository(clock));

/** A store without its own `putCompleted`: the base class's default (a claim, then the completion) keeps the contract. */
class TwoWriteOptimisticRepository extends InMemoryIdempotencyRepository {
  override putCompleted(input: PutCompletedInput) {
    return IdempotencyRepository.prototype.putCompleted.call(this, input);
  }
}
describeRepositoryContract('the default putCompleted', async (clock) => new TwoWriteOptimisticRepository(clock));

const silent = { log: () => undefined, warn: () => undefined };

const CONTRACT_LAYOUTS: [string, TableLayoutOptions][] = [
  ['', {}],
  [' single-table (PK/SK, prefix, renamed attributes)', LAYOUT_OPTIONS['single-table']],
];

/** A DynamoDB repository on its own table, reached through a fault proxy that can lose an answer. */
function dynamoSubject(endpoint: () => string, proxies: FaultProxy[], layout: TableLayoutOptions = {}) {
  return async (clock: ManualClock) => {
    const tableName = uniqueTableName();
    await ensureIdempotencyTable(localClient(endpoint()), { tableName, ...layout }, silent);
    const proxy = await startFaultProxy(endpoint());
    proxies.push(proxy);
    return {
      repository: new DynamoDbIdempotencyRepository({
        client: localClient(proxy.endpoint),
        tableName,
        clock,
        ...layout,
      }),
      loseNextClaimAnswer: () => {
        proxy.dropAnswers = 1;
        proxy.dropAnswersOf = 'UpdateItem';
      },
    };
  };
}

describeOnDynamoDbLocal('on DynamoDB Local', () => {
  const proxies: FaultProxy[] = [];
  let endpoint = '';
  beforeAll(async () => {
    endpoint = (await startStore('dynamodb-local')).endpoint;
  });
  afterAll(async () => {
    for (const proxy of proxies) await proxy.stop();
  });
  for (const [name, layout] of CONTRACT_LAYOUTS) {
    describeRepositoryContract(
      `DynamoDB Local${name}`,
      dynamoSubject(() => endpoint, proxies, layout),
      { networked: true, partitions: layout.keySchema?.sortKey !== undefined },
    );
  }
});

describe('on dynalite', () => {
  let dynamo: Dynalite;
  const proxies: FaultProxy[] = [];

  beforeAll(async () => {
    dynamo = await startDynalite();
  });
  afterAll(async () => {
    for (const proxy of proxies) await proxy.stop();
    await dynamo.stop();
  });

  for (const [name, layout] of CONTRACT_LAYOUTS) {
    describeRepositoryContract(
      `DynamoDB${name}`,
      dynamoSubject(() => dynamo.endpoint, proxies, layout),
      { networked: true, partitions: layout.keySchema?.sortKey !== undefined },
    );
  }

  describe('the stored item', () => {
    const client = () => localClient(dynamo.endpoint);
    const rawItem = async (tableName: string, key: string) =>
      (await client().send(new GetItemCommand({ TableName: tableName, Key: { pk: { S: key } }, ConsistentRead: true })))
        .Item;

    async function completed(body: unknown) {
      const tableName = uniqueTableName();
      await ensureIdempotencyTable(client(), tableName, silent);
      const repository = new DynamoDbIdempotencyRepository({ client: client(), tableName, clock: testClock() });
      const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
      if (!claim.claimed) throw new Error('claim lost');
      await repository.complete({
        key: 'k',
        claimToken: claim.claimToken,
        response: { statusCode: 200, headers: {}, body },
        ttlSeconds: 60,
      });
      return { repository, item: await rawItem(tableName, 'k') };
    }

    it('types expires_at and the timestamps as Numbers (TTL ignores Strings)', async () => {
      const { item } = await completed({ small: true });
      expect(item?.expires_at.N).toMatch(/^\d+$/);
      expect(item?.pending_since.N).toMatch(/^\d+$/);
      expect(item?.completed_at.N).toMatch(/^\d+$/);
      expect(item?.status.S).toBe('COMPLETED');
      expect(JSON.parse(item?.response.S ?? '')).toEqual({ statusCode: 200, headers: {}, body: { small: true } });
    });

    it('gzips a large response into a Binary attribute, past the 400 KB item limit', async () => {
      const body = { rows: Array.from({ length: 20_000 }, (_, i) => ({ id: i, name: `row ${i}` })) };
      expect(JSON.stringify(body).length).toBeGreaterThan(400 * 1024);
      const { repository, item } = await completed(body);
      expect(item?.response.B).toBeInstanceOf(Uint8Array);
      expect(JSON.parse(gunzipSync(item!.response.B!).toString()).body).toEqual(body);
      expect((await repository.get({ key: 'k' }))?.response?.body).toEqual(body);
    });

    it('stores a response too large even compressed without its body, says so in a warning, and still completes the key', async () => {
      const incompressible = randomBytes(450 * 1024).toString('base64');
      const logs = new CapturedLogs();
      logs.start();
      try {
        const { repository, item } = await completed(incompressible);
        expect(item?.status.S).toBe('COMPLETED');
        expect((await repository.get({ key: 'k' }))?.response).toEqual({
          statusCode: 200,
          headers: {},
          bodyOmitted: true,
          omittedBecause: 'too-large',
        });
        expect(logs.at('warn')).toEqual([
          expect.stringMatching(
            /^Response of \d{6} bytes \(compressed\) exceeds the 389120-byte limit: stored without its body; duplicates get 409 response-not-stored$/,
          ),
        ]);
      } finally {
        logs.stop();
      }
    });
  });
});
