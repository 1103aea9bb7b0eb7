import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Logger } from '@nestjs/common';
import {
  IdempotencyStoreMisconfiguredError,
  IdempotencyStoreThrottledError,
  IdempotencyStoreUnavailableError,
} from '../errors/idempotency.errors';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { StoreCalls } from './store-calls';

/** Every repository request goes through `StoreCalls.send`: timed, counted, logged, and its faults typed. */
const named = (name: string) => Object.assign(new Error(name), { name });

function storeCallsAnswering(answer: () => unknown) {
  const documents = DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'us-east-1' }));
  jest.spyOn(documents, 'send').mockImplementation(async () => answer());
  const telemetry = new IdempotencyTelemetry();
  const timed = jest.spyOn(telemetry, 'storeCall');
  const logs = {
    debug: jest.spyOn(Logger.prototype, 'debug').mockImplementation(() => undefined),
    error: jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined),
  };
  return { calls: new StoreCalls(documents, 'keys', telemetry), timed, logs };
}

const get = new GetItemCommand({ TableName: 'keys', Key: { pk: { S: 'k' } } });

describe('StoreCalls.send', () => {
  afterEach(() => jest.restoreAllMocks());

  it("hands back the answer and times the call in seconds, result 'ok'", async () => {
    const { calls, timed } = storeCallsAnswering(() => ({ Item: { pk: { S: 'k' } } }));
    await expect(calls.send('get', get)).resolves.toEqual({ Item: { pk: { S: 'k' } } });
    expect(timed).toHaveBeenCalledWith('keys', 'get', expect.any(Number), 'ok');
    const seconds = timed.mock.calls[0][2];
    expect(seconds).toBeGreaterThanOrEqual(0);
    expect(seconds).toBeLessThan(1); // an immediate answer, in seconds (not milliseconds)
  });

  it.each([
    ['ConditionalCheckFailedException', 'claim'],
    ['TransactionCanceledException', 'commit'],
    ['ReplicatedWriteConflictException', 'claim'],
  ] as const)('passes %s through on a %s as an answer, logged at debug only', async (code, operation) => {
    const refusal = named(code);
    const { calls, timed, logs } = storeCallsAnswering(() => {
      throw refusal;
    });
    await expect(calls.send(operation, get)).rejects.toBe(refusal);
    expect(logs.debug).toHaveBeenCalledWith(`conditional write rejected: ${operation} on keys (${code})`);
    expect(logs.error).not.toHaveBeenCalled();
    expect(timed).toHaveBeenCalledWith('keys', operation, expect.any(Number), code);
  });

  it('treats a write conflict across Regions outside a claim as a fault (the service retries it)', async () => {
    const { calls, logs } = storeCallsAnswering(() => {
      throw named('ReplicatedWriteConflictException');
    });
    await expect(calls.send('complete', get)).rejects.toBeInstanceOf(IdempotencyStoreUnavailableError);
    expect(logs.error).toHaveBeenCalledWith({
      msg: 'idempotency store call failed',
      operation: 'complete',
      table: 'keys',
      dynamo_error_code: 'ReplicatedWriteConflictException',
    });
  });

  it('throws throttling as a throttled store, logged as a failed call', async () => {
    const { calls, timed, logs } = storeCallsAnswering(() => {
      throw named('ProvisionedThroughputExceededException');
    });
    await expect(calls.send('claim', get)).rejects.toBeInstanceOf(IdempotencyStoreThrottledError);
    expect(logs.error).toHaveBeenCalledWith(expect.objectContaining({ msg: 'idempotency store call failed' }));
    expect(logs.debug).not.toHaveBeenCalled();
    expect(timed).toHaveBeenCalledWith('keys', 'claim', expect.any(Number), 'ProvisionedThroughputExceededException');
  });

  it('logs a misconfiguration with its fix, saying retrying will not help', async () => {
    const { calls, logs } = storeCallsAnswering(() => {
      throw named('ResourceNotFoundException');
    });
    await expect(calls.send('get', get)).rejects.toBeInstanceOf(IdempotencyStoreMisconfiguredError);
    expect(logs.error).toHaveBeenCalledWith({
      msg: 'idempotency store refused the call; retrying will not help',
      operation: 'get',
      table: 'keys',
      dynamo_error_code: 'ResourceNotFoundException',
      fix: expect.stringContaining('table:create'),
    });
  });
});
