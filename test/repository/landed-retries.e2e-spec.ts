import { Test } from '@nestjs/testing';
import {
  DynamoDbIdempotencyRepository,
  IdempotencyModule,
  IdempotencyRepository,
  IdempotencyService,
} from 'nestjs-dynamodb-idempotency';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { createIdempotencyTable } from '../support/table';
import { metricValue, registerTestTelemetry } from '../support/telemetry';

/**
 * A write that landed in DynamoDB (dynalite) but whose answer was lost: the proxy cuts the connection after dynalite
 * answered, the SDK retries the same request, and the retry meets its own first attempt.
 */
const telemetry = registerTestTelemetry();
let dynamo: Dynalite;
let proxy: FaultProxy;
let tableName: string;
beforeAll(async () => {
  dynamo = await startDynalite();
  proxy = await startFaultProxy(dynamo.endpoint);
  tableName = uniqueTableName('landed');
  await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
});
afterEach(() => {
  proxy.dropAnswers = 0;
  proxy.dropAnswersOf = undefined;
  proxy.operations.length = 0;
});
afterAll(async () => {
  await proxy.stop();
  await dynamo.stop();
});

it('a claim whose first attempt landed is recognised by its own claim token: this attempt won', async () => {
  const repository = new DynamoDbIdempotencyRepository({ client: localClient(proxy.endpoint), tableName });
  proxy.dropAnswers = 1;
  proxy.dropAnswersOf = 'UpdateItem';
  const claim = await repository.claim({ key: 'landed-claim', fingerprint: 'fp', leaseSeconds: 60 });
  expect(proxy.operations.slice(0, 2)).toEqual(['UpdateItem', 'UpdateItem']); // the SDK retried the landed claim
  expect(claim).toEqual({ claimed: true, claimToken: expect.any(String), run: 1, steps: [], startedSteps: [] });
  expect((await repository.get({ key: 'landed-claim' }))?.claimToken).toBe(claim.claimed && claim.claimToken);
});

it('a completion whose first attempt landed is the benign race: counted, the caller gets its result, the record stays', async () => {
  const moduleRef = await Test.createTestingModule({
    imports: [
      IdempotencyModule.forRoot({ client: localClient(proxy.endpoint), tableName, replayCache: { enabled: false } }),
    ],
  }).compile();
  const service = moduleRef.get(IdempotencyService);
  const racesBefore = metricValue(await telemetry.scrape(), 'dedup_concurrent_completion_race_total');
  let runs = 0;
  const firstRun = async () => {
    // The claim (an UpdateItem too) has been answered: the next UpdateItem is the completion.
    proxy.dropAnswers = 1;
    proxy.dropAnswersOf = 'UpdateItem';
    return `run ${++runs}`;
  };
  expect(await service.execute({ operation: 'landed', key: 'landed-completion' }, firstRun)).toBe('run 1');
  expect(proxy.operations.filter((operation) => operation === 'UpdateItem').length).toBeGreaterThanOrEqual(2);
  expect(metricValue(await telemetry.scrape(), 'dedup_concurrent_completion_race_total')).toBe(racesBefore + 1);
  expect(await service.execute({ operation: 'landed', key: 'landed-completion' }, async () => `run ${++runs}`)).toBe(
    'run 1',
  );
  const records = [];
  for await (const page of moduleRef.get(IdempotencyRepository).scan({ pageSize: 10 })) records.push(...page);
  expect(records.filter((record) => record.key.startsWith('fn landed#')).map((record) => record.status)).toEqual([
    'COMPLETED',
  ]);
});
