import { Logger, LoggerService } from '@nestjs/common';
import { DynamoDbIdempotencyRepository, ensureIdempotencyTable, IdempotencyStoreThrottledError } from 'nestjs-dynamodb-idempotency';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';

/**
 * The runbook's observability checklist: a structured log on every failed DynamoDB call whose `dynamo_error_code`
 * tells a lost race (ConditionalCheckFailedException, an expected answer: debug) from throttling (a fault: error).
 */
describe('store call logs', () => {
  let dynamo: Dynalite;
  let proxy: FaultProxy;
  let repository: DynamoDbIdempotencyRepository;
  const entries: { level: string; message: unknown }[] = [];
  const capture = (level: string) => (message: unknown) => entries.push({ level, message });
  const logger: LoggerService = { log: capture('log'), error: capture('error'), warn: capture('warn'), debug: capture('debug'), verbose: capture('verbose') };

  beforeAll(async () => {
    dynamo = await startDynalite();
    proxy = await startFaultProxy(dynamo.endpoint);
    const tableName = uniqueTableName();
    await ensureIdempotencyTable(localClient(dynamo.endpoint), tableName, { log: () => undefined, warn: () => undefined });
    repository = new DynamoDbIdempotencyRepository({ client: localClient(proxy.endpoint), tableName });
  });
  afterAll(async () => {
    await proxy.stop();
    await dynamo.stop();
  });
  beforeEach(() => {
    entries.length = 0;
    proxy.mode = 'pass';
    Logger.overrideLogger(logger);
  });
  afterEach(() => Logger.overrideLogger(false));

  it('logs a lost claim at debug level as a rejected condition, with its operation and error code', async () => {
    const key = `lost-${Date.now()}`;
    await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 });
    entries.length = 0;
    expect((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 60 })).claimed).toBe(false);
    expect(entries).toContainEqual({
      level: 'debug',
      message: expect.objectContaining({ msg: 'conditional write rejected', operation: 'claim', dynamo_error_code: 'ConditionalCheckFailedException' }),
    });
    expect(entries.filter((entry) => entry.level === 'error')).toEqual([]);
  });

  it('logs a throttled call as an error, naming ProvisionedThroughputExceededException', async () => {
    proxy.mode = 'throttle';
    await expect(repository.claim({ key: `throttled-${Date.now()}`, fingerprint: 'fp', leaseSeconds: 60 })).rejects.toBeInstanceOf(IdempotencyStoreThrottledError);
    expect(entries).toEqual([
      {
        level: 'error',
        message: expect.objectContaining({ msg: 'idempotency store call failed', operation: 'claim', dynamo_error_code: 'ProvisionedThroughputExceededException' }),
      },
    ]);
  });
});
