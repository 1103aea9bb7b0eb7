import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { IdempotencyStoreThrottledError, IdempotencyStoreUnavailableError } from '../errors/idempotency.errors';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { ManualClock } from '../testing/manual-clock';
import { DynamoDbIdempotencyRepository } from './dynamodb-idempotency.repository';

/**
 * Optimistic mode's put (`putCompleted`) on a mocked client: what no local server shows on demand (a record that
 * vanishes between the refused put and the read, a fault of the put itself, a caller's retry after a fault).
 */
const NOW = 1_800_000_000;

function mockedRepository(telemetry?: IdempotencyTelemetry) {
  const documents = DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'us-east-1' }));
  const send = jest.spyOn(documents, 'send');
  const clock = new ManualClock(NOW * 1000);
  const repository = new DynamoDbIdempotencyRepository({ client: documents, tableName: 't', clock, telemetry });
  const sent = () => send.mock.calls.map(([command]) => command.constructor.name);
  return { repository, send, sent, clock };
}

const write = (id: string) => ({ Put: { TableName: 'shop', Item: { pk: id } } });
const putCompleted = (repository: DynamoDbIdempotencyRepository, writes?: ReturnType<typeof write>[]) =>
  repository.putCompleted({
    key: 'k',
    fingerprint: 'fp',
    response: { statusCode: 201, headers: {}, body: { id: 'order-1' } },
    ttlSeconds: 60,
    writes,
  });
const conditionFailed = (item?: Record<string, unknown>) =>
  new ConditionalCheckFailedException({
    message: 'The conditional request failed',
    $metadata: {},
    ...(item ? { Item: marshall(item) } : {}),
  });
const cancelled = (...codes: string[]) =>
  new TransactionCanceledException({
    message: 'Transaction cancelled',
    $metadata: {},
    CancellationReasons: codes.map((Code) => ({ Code })),
  });

describe('putCompleted (optimistic mode) with a mocked client', () => {
  it('puts the COMPLETED record in one conditional PutItem and reports its expiry', async () => {
    const { repository, send, sent } = mockedRepository();
    send.mockResolvedValueOnce({} as never);
    await expect(putCompleted(repository)).resolves.toEqual({ ok: true, expiresAt: NOW + 60 });
    expect(sent()).toEqual(['PutItemCommand']);
  });

  it('counts a put refused by its condition as a refused claim (the write a claim would be)', async () => {
    const telemetry = new IdempotencyTelemetry();
    const rejected = jest.spyOn(telemetry, 'conditionRejected');
    const { repository, send } = mockedRepository(telemetry);
    const winner = { pk: 'k', status: 'COMPLETED', expires_at: NOW + 60, claim_token: 'theirs', fingerprint: 'fp' };
    send.mockRejectedValueOnce(
      conditionFailed({
        ...winner,
        pending_since: NOW,
        completed_at: NOW,
        response: '{"statusCode":201,"headers":{}}',
      }) as never,
    );
    await expect(putCompleted(repository)).resolves.toMatchObject({ ok: false, reason: 'exists' });
    expect(rejected.mock.calls).toEqual([['t', 'claim']]);
  });

  it('puts again while the record it lost to has vanished by the read, and gives up with a store fault after three attempts', async () => {
    const { repository, send, sent } = mockedRepository();
    send.mockImplementation((async (command: object) => {
      if (command.constructor.name === 'PutItemCommand') throw conditionFailed();
      return {}; // GetItem: no item any more
    }) as never);
    const put = putCompleted(repository);
    await expect(put).rejects.toBeInstanceOf(IdempotencyStoreUnavailableError);
    await expect(put).rejects.toMatchObject({ operation: 'claim', dynamoErrorCode: 'ClaimContention' });
    expect(sent()).toEqual(Array(3).fill(['PutItemCommand', 'GetItemCommand']).flat());
  });

  it('passes a fault of the put on as a store fault, without reading the record', async () => {
    const { repository, send, sent } = mockedRepository();
    send.mockRejectedValue(
      new ProvisionedThroughputExceededException({ message: 'slow down', $metadata: {} }) as never,
    );
    await expect(putCompleted(repository)).rejects.toBeInstanceOf(IdempotencyStoreThrottledError);
    expect(sent().every((call) => call === 'PutItemCommand')).toBe(true);
  });

  it('with writes: sends the transaction again under a new token when the record it lost to has vanished by the read', async () => {
    // A ClientRequestToken already used for another request would be refused (or answered as that request).
    const { repository, send, sent } = mockedRepository();
    send
      .mockRejectedValueOnce(cancelled('None', 'ConditionalCheckFailed') as never)
      .mockResolvedValueOnce({} as never) // GetItem: no item any more
      .mockResolvedValueOnce({} as never);
    await expect(putCompleted(repository, [write('order-1')])).resolves.toEqual({ ok: true, expiresAt: NOW + 60 });
    expect(sent()).toEqual(['TransactWriteCommand', 'GetItemCommand', 'TransactWriteCommand']);
    const [first, second] = [send.mock.calls[0][0], send.mock.calls[2][0]] as TransactWriteCommand[];
    expect(second.input.ClientRequestToken).not.toEqual(first.input.ClientRequestToken);
  });

  it("with writes: a caller's retry after a store fault sends the same transaction, token and expiry, even when the clock moved", async () => {
    const { repository, send, clock } = mockedRepository();
    send.mockRejectedValueOnce(cancelled('None', 'ThrottlingError') as never).mockResolvedValueOnce({} as never);
    const writes = [write('order-1')];
    await expect(putCompleted(repository, writes)).rejects.toBeInstanceOf(IdempotencyStoreThrottledError);
    clock.advanceSeconds(5);
    await expect(putCompleted(repository, writes)).resolves.toEqual({ ok: true, expiresAt: NOW + 60 });
    const [first, retried] = send.mock.calls.map(([command]) => (command as TransactWriteCommand).input);
    expect(retried).toEqual(first);
  });
});
