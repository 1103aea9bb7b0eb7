import {
  DynamoDbIdempotencyRepository,
  ensureIdempotencyTable,
  IdempotencyStoreThrottledError,
} from 'nestjs-dynamodb-idempotency';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { CapturedLogs } from '../support/logs';

/**
 * The runbook's observability checklist: a structured log on every failed DynamoDB call whose `dynamo_error_code`
 * tells a lost race (ConditionalCheckFailedException, an expected answer: debug) from throttling (a fault: error).
 */
describe('store call logs', () => {
  let dynamo: Dynalite;
  let proxy: FaultProxy;
  let repository: DynamoDbIdempotencyRepository;
  const logs = new CapturedLogs();

  beforeAll(async () => {
    dynamo = await startDynalite();
    proxy = await startFaultProxy(dynamo.endpoint);
    const tableName = uniqueTableName();
    await ensureIdempotencyTable(localClient(dynamo.endpoint), tableName, {
      log: () => undefined,
      warn: () => undefined,
    });
    repository = new DynamoDbIdempotencyRepository({ client: localClient(proxy.endpoint), tableName });
  });
  afterAll(async () => {
    await proxy.stop();
    await dynamo.stop();
  });
  beforeEach(() => {
    proxy.mode = 'pass';
    logs.clear();
    logs.start();
  });
  afterEach(() => logs.stop());

  it('logs a lost claim at debug level as one line: a rejected condition, its operation and error code', async () => {
    const key = `lost-${Date.now()}`;
    await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
    logs.clear();
    expect((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })).claimed).toBe(false);
    expect(logs.entries).toContainEqual({
      level: 'debug',
      message: expect.stringMatching(/^conditional write rejected: claim on \S+ \(ConditionalCheckFailedException\)$/),
    });
    expect(logs.at('error')).toEqual([]);
  });

  it('logs a throttled call as an error, naming ProvisionedThroughputExceededException', async () => {
    proxy.mode = 'throttle';
    await expect(
      repository.claim({ key: `throttled-${Date.now()}`, fingerprint: 'fp', leaseSeconds: 60 }),
    ).rejects.toBeInstanceOf(IdempotencyStoreThrottledError);
    expect(logs.entries).toEqual([
      {
        level: 'error',
        message: expect.objectContaining({
          msg: 'idempotency store call failed',
          operation: 'claim',
          dynamo_error_code: 'ProvisionedThroughputExceededException',
        }),
      },
    ]);
  });
});
