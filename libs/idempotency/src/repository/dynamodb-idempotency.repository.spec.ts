import { Readable } from 'node:stream';
import {
  ConditionalCheckFailedException,
  DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { ConfiguredRetryStrategy } from '@smithy/core/retry';
import { IdempotencyClock } from '../idempotency.clock';
import { IdempotencyStoreThrottledError, IdempotencyStoreUnavailableError } from '../idempotency.errors';
import { DynamoDbIdempotencyRepository } from './dynamodb-idempotency.repository';

/**
 * What dynalite can't show: the ALL_OLD item on a failed condition, throttling after the SDK's retries,
 * an item that vanishes between the failed claim and the read, network faults.
 */
class FixedClock extends IdempotencyClock {
  nowMs() {
    return 1_800_000_000_000;
  }
}
const NOW = 1_800_000_000;

const conditionFailed = (item?: Record<string, unknown>) =>
  new ConditionalCheckFailedException({
    message: 'The conditional request failed',
    $metadata: {},
    ...(item ? { Item: marshall(item) } : {}),
  });

function mockedRepository() {
  const documents = DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'us-east-1' }));
  const send = jest.spyOn(documents, 'send');
  const repository = new DynamoDbIdempotencyRepository({ client: documents, tableName: 't', clock: new FixedClock() });
  const sent = () => send.mock.calls.map(([command]) => command.constructor.name);
  return { repository, send, sent };
}

const pendingItem = {
  pk: 'k',
  status: 'PENDING',
  expires_at: NOW + 30,
  claim_token: 'theirs',
  fingerprint: 'fp',
  pending_since: NOW - 30,
};

describe('DynamoDbIdempotencyRepository with a mocked client', () => {
  it('uses the item returned on a failed claim (ALL_OLD) without reading it again', async () => {
    const { repository, send, sent } = mockedRepository();
    send.mockRejectedValueOnce(conditionFailed(pendingItem) as never);
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    expect(claim).toEqual({
      claimed: false,
      existing: expect.objectContaining({ status: 'PENDING', claimToken: 'theirs', expiresAt: NOW + 30 }),
    });
    expect(sent()).toEqual(['PutCommand']);
    const put = send.mock.calls[0][0] as PutCommand;
    expect(put.input).toMatchObject({
      ConditionExpression: 'attribute_not_exists(pk) OR expires_at < :now OR #s = :failed',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      ExpressionAttributeValues: { ':now': NOW, ':failed': 'FAILED' },
    });
  });

  it('reads with ConsistentRead when the failed claim carries no item (as on dynalite)', async () => {
    const { repository, send, sent } = mockedRepository();
    send.mockRejectedValueOnce(conditionFailed() as never).mockResolvedValueOnce({ Item: pendingItem } as never);
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    expect(claim.claimed).toBe(false);
    expect(sent()).toEqual(['PutCommand', 'GetCommand']);
    expect((send.mock.calls[1][0] as GetCommand).input.ConsistentRead).toBe(true);
  });

  it('claims again when the item vanished between the failed claim and the read', async () => {
    const { repository, send, sent } = mockedRepository();
    send
      .mockRejectedValueOnce(conditionFailed() as never)
      .mockResolvedValueOnce({} as never)
      .mockResolvedValueOnce({} as never);
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    expect(claim).toEqual({ claimed: true, claimToken: expect.any(String) });
    expect(sent()).toEqual(['PutCommand', 'GetCommand', 'PutCommand']);
  });

  it('gives up with a store fault when the item keeps vanishing', async () => {
    const { repository, send } = mockedRepository();
    send.mockImplementation((async (command: unknown) => {
      if (command instanceof PutCommand) throw conditionFailed();
      return {};
    }) as never);
    const claim = repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    await expect(claim).rejects.toBeInstanceOf(IdempotencyStoreUnavailableError);
    await expect(claim).rejects.toMatchObject({ operation: 'claim', dynamoErrorCode: 'ClaimContention' });
    expect(send).toHaveBeenCalledTimes(6);
  });

  it('claims again while the record read back is claimable, and hands it over as found after the last attempt', async () => {
    // Each claim's condition fails, yet each read finds a FAILED record: another caller keeps claiming and failing
    // in between. Three attempts, then the loser gets that record (its caller decides), never a store fault.
    const { repository, send, sent } = mockedRepository();
    send.mockImplementation((async (command: unknown) => {
      if (command instanceof PutCommand) throw conditionFailed();
      return { Item: { ...pendingItem, status: 'FAILED' } };
    }) as never);
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    expect(claim).toEqual({ claimed: false, existing: expect.objectContaining({ status: 'FAILED', claimToken: 'theirs' }) });
    expect(sent()).toEqual(['PutCommand', 'GetCommand', 'PutCommand', 'GetCommand', 'PutCommand', 'GetCommand']);
  });

  it('recognises its own claim when an SDK retry of a landed write fails the condition', async () => {
    const { repository, send } = mockedRepository();
    send.mockImplementationOnce((async (command: PutCommand) => {
      throw conditionFailed(command.input.Item);
    }) as never);
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    expect(claim).toEqual({ claimed: true, claimToken: (send.mock.calls[0][0] as PutCommand).input.Item?.claim_token });
  });

  it('guards completion by status and claim token, and explains a refusal from the returned item', async () => {
    const { repository, send, sent } = mockedRepository();
    send.mockRejectedValueOnce(
      conditionFailed({ ...pendingItem, status: 'COMPLETED', claim_token: 'mine', response: '{"statusCode":201,"headers":{}}' }) as never,
    );
    const result = await repository.complete({ key: 'k', claimToken: 'mine', response: { statusCode: 201, headers: {} }, ttlSeconds: 60 });
    expect(result).toMatchObject({ ok: false, reason: 'already_completed' });
    expect(sent()).toEqual(['UpdateCommand']);
    expect((send.mock.calls[0][0] as UpdateCommand).input).toMatchObject({
      ConditionExpression: '#s = :pending AND claim_token = :token',
      ExpressionAttributeValues: expect.objectContaining({ ':pending': 'PENDING', ':token': 'mine', ':expiresAt': NOW + 60 }),
    });
  });
});

/** A request handler that answers every DynamoDB call with one scripted wire response. */
function clientAnswering(answer: () => { statusCode: number; type: string } | Error) {
  const calls = { count: 0 };
  const client = new DynamoDBClient({
    region: 'us-east-1',
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    retryStrategy: new ConfiguredRetryStrategy(3, 1),
    requestHandler: {
      handle: async () => {
        calls.count += 1;
        const scripted = answer();
        if (scripted instanceof Error) throw scripted;
        const body = JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${scripted.type}`, message: scripted.type });
        return {
          response: {
            statusCode: scripted.statusCode,
            headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-errortype': scripted.type },
            body: Readable.from([Buffer.from(body)]),
          },
        };
      },
    } as never,
  });
  return { calls, repository: new DynamoDbIdempotencyRepository({ client, tableName: 't', clock: new FixedClock() }) };
}

describe('DynamoDbIdempotencyRepository store faults', () => {
  it.each(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded'])(
    'reports %s as throttling after the SDK retried it, never as a duplicate',
    async (type) => {
      const { calls, repository } = clientAnswering(() => ({ statusCode: 400, type }));
      const claim = repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
      await expect(claim).rejects.toBeInstanceOf(IdempotencyStoreThrottledError);
      await expect(claim).rejects.toMatchObject({ dynamoErrorCode: type, operation: 'claim' });
      expect(calls.count).toBe(3);
    },
  );

  it.each([
    ['a 500', () => ({ statusCode: 500, type: 'InternalServerError' }), 'InternalServerError'],
    ['a missing table', () => ({ statusCode: 400, type: 'ResourceNotFoundException' }), 'ResourceNotFoundException'],
    ['a refused connection', () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), 'ECONNREFUSED'],
  ])('reports %s as the store being unavailable', async (_, answer, code) => {
    const { repository } = clientAnswering(answer);
    await expect(repository.get({ key: 'k' })).rejects.toMatchObject({
      name: 'IdempotencyStoreUnavailableError',
      dynamoErrorCode: code,
    });
  });
});
