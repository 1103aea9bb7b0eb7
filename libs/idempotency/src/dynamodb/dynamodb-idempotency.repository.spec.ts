import { Readable } from 'node:stream';
import { recordKey } from '../keys/record-key';
import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  GetItemCommand,
  ScanCommand,
  TransactionCanceledException,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { ConfiguredRetryStrategy } from '@smithy/core/retry';
import { ManualClock } from '../testing/manual-clock';
import { decodeStoredResponse } from '../response/stored-response.codec';
import { IdempotencyStoreThrottledError, IdempotencyStoreUnavailableError } from '../errors/idempotency.errors';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import type { IdempotencyRecord } from '../repository/idempotency.record';
import { DynamoDbIdempotencyRepository } from './dynamodb-idempotency.repository';

/**
 * What dynalite can't show: the ALL_OLD item on a failed condition, throttling after the SDK's retries,
 * an item that vanishes between the failed claim and the read, network faults.
 */
const NOW = 1_800_000_000;

const conditionFailed = (item?: Record<string, unknown>) =>
  new ConditionalCheckFailedException({
    message: 'The conditional request failed',
    $metadata: {},
    ...(item ? { Item: marshall(item) } : {}),
  });

function mockedRepository(telemetry?: IdempotencyTelemetry) {
  const documents = DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'us-east-1' }));
  const send = jest.spyOn(documents, 'send');
  const clock = new ManualClock(NOW * 1000);
  const repository = new DynamoDbIdempotencyRepository({ client: documents, tableName: 't', clock, telemetry });
  const sent = () => send.mock.calls.map(([command]) => command.constructor.name);
  return { repository, send, sent, clock };
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
    expect(sent()).toEqual(['UpdateItemCommand']);
    const update = send.mock.calls[0][0] as UpdateItemCommand;
    expect(update.input).toMatchObject({
      ConditionExpression:
        'attribute_not_exists(#pk) OR (#fingerprint = :fingerprint AND ((#status = :failed AND (attribute_not_exists(#response) OR #expires < :now)) OR (#status = :pending AND #expires < :leaseCutoff)))',
      ExpressionAttributeNames: { '#pk': 'pk', '#status': 'status', '#expires': 'expires_at' },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      ExpressionAttributeValues: expect.objectContaining({
        ':leaseCutoff': { N: String(NOW) }, // no clockSkewSeconds given: 0
        ':now': { N: String(NOW) },
        ':failed': { S: 'FAILED' },
        ':pending': { S: 'PENDING' },
      }),
    });
  });

  it("writes the record's attributes as DynamoDB types, and refuses a value of any other type before sending", async () => {
    const { repository, send } = mockedRepository();
    send.mockResolvedValueOnce({} as never);
    await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60, holder: 'host-a:42' });
    const update = (send.mock.calls[0][0] as UpdateItemCommand).input;
    expect(update.Key).toEqual({ pk: { S: 'k' } });
    expect(update.UpdateExpression).toBe(
      'SET #status = :pending, #expires = :expiresAt, #token = :token, #fingerprint = :fingerprint, #pending = :now, ' +
        '#holder = :holder, #inflight = :shard, #steps = if_not_exists(#steps, :noSteps), ' +
        '#owners = list_append(if_not_exists(#owners, :noOwners), :owner) REMOVE #response, #completed, #renewed ADD #runs :one',
    );
    expect(update.ExpressionAttributeValues).toMatchObject({
      ':pending': { S: 'PENDING' },
      ':expiresAt': { N: String(NOW + 60) },
      ':token': { S: expect.any(String) },
      ':fingerprint': { S: 'fp' },
      ':holder': { S: 'host-a:42' },
      ':now': { N: String(NOW) },
      ':shard': { S: 'in-flight#b' }, // 'k' is not a record key's hash: its character sum, 107, mod 16
    });
    const claim = repository.claim({ key: 'k', fingerprint: undefined as unknown as string, leaseSeconds: 60 });
    await expect(claim).rejects.toThrow('fingerprint: an idempotency record has no attribute of type undefined');
    expect(send).toHaveBeenCalledTimes(1);
  });

  it('reads with ConsistentRead when the failed claim carries no item (as on dynalite)', async () => {
    const { repository, send, sent } = mockedRepository();
    send
      .mockRejectedValueOnce(conditionFailed() as never)
      .mockResolvedValueOnce({ Item: marshall(pendingItem) } as never);
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    expect(claim.claimed).toBe(false);
    expect(sent()).toEqual(['UpdateItemCommand', 'GetItemCommand']);
    expect((send.mock.calls[1][0] as GetItemCommand).input.ConsistentRead).toBe(true);
  });

  it('claims again when the item vanished between the failed claim and the read', async () => {
    const { repository, send, sent } = mockedRepository();
    send
      .mockRejectedValueOnce(conditionFailed() as never)
      .mockResolvedValueOnce({} as never)
      .mockResolvedValueOnce({} as never);
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    expect(claim).toEqual({ claimed: true, claimToken: expect.any(String), run: 1, steps: [] });
    expect(sent()).toEqual(['UpdateItemCommand', 'GetItemCommand', 'UpdateItemCommand']);
  });

  it('gives up with a store fault when the item keeps vanishing', async () => {
    const { repository, send } = mockedRepository();
    send.mockImplementation((async (command: unknown) => {
      if (command instanceof UpdateItemCommand) throw conditionFailed();
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
      if (command instanceof UpdateItemCommand) throw conditionFailed();
      return { Item: marshall({ ...pendingItem, status: 'FAILED' }) };
    }) as never);
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    expect(claim).toEqual({
      claimed: false,
      existing: expect.objectContaining({ status: 'FAILED', claimToken: 'theirs' }),
    });
    expect(sent()).toEqual([
      'UpdateItemCommand',
      'GetItemCommand',
      'UpdateItemCommand',
      'GetItemCommand',
      'UpdateItemCommand',
      'GetItemCommand',
    ]);
  });

  it('recognises its own claim when an SDK retry of a landed write fails the condition', async () => {
    const { repository, send } = mockedRepository();
    send.mockImplementationOnce((async (command: UpdateItemCommand) => {
      const values = unmarshall(command.input.ExpressionAttributeValues!);
      throw conditionFailed({ ...pendingItem, claim_token: values[':token'], runs: 1 });
    }) as never);
    const claim = await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    const sentToken = (send.mock.calls[0][0] as UpdateItemCommand).input.ExpressionAttributeValues?.[':token'].S;
    expect(claim).toEqual({ claimed: true, claimToken: sentToken, run: 1, steps: [], startedSteps: [] });
  });

  it('reports each call to the store with its duration in seconds, its operation and its result', async () => {
    const telemetry = new IdempotencyTelemetry();
    const storeCall = jest.spyOn(telemetry, 'storeCall');
    const { repository, send } = mockedRepository(telemetry);
    send.mockImplementationOnce((async () => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      throw conditionFailed(pendingItem);
    }) as never);
    const started = performance.now();
    await repository.claim({ key: 'k', fingerprint: 'fp', leaseSeconds: 60 });
    const claimSeconds = (performance.now() - started) / 1000;
    expect(storeCall).toHaveBeenCalledTimes(1);
    const [table, operation, seconds, result] = storeCall.mock.calls[0];
    expect([table, operation, result]).toEqual(['t', 'claim', 'ConditionalCheckFailedException']);
    // The call lasted its 50 ms answer, within the claim that made it: in seconds, not milliseconds.
    expect(seconds).toBeGreaterThanOrEqual(0.04);
    expect(seconds).toBeLessThanOrEqual(claimSeconds);
  });

  it('guards completion by status and claim token, and explains a refusal from the returned item', async () => {
    const { repository, send, sent } = mockedRepository();
    send.mockRejectedValueOnce(
      conditionFailed({
        ...pendingItem,
        status: 'COMPLETED',
        claim_token: 'mine',
        response: '{"statusCode":201,"headers":{}}',
      }) as never,
    );
    const result = await repository.complete({
      key: 'k',
      claimToken: 'mine',
      response: { statusCode: 201, headers: {} },
      ttlSeconds: 60,
    });
    expect(result).toMatchObject({ ok: false, reason: 'already_completed' });
    expect(sent()).toEqual(['UpdateItemCommand']);
    expect((send.mock.calls[0][0] as UpdateItemCommand).input).toMatchObject({
      ConditionExpression: '#status = :pending AND #token = :token',
      ExpressionAttributeNames: {
        '#status': 'status',
        '#token': 'claim_token',
        '#response': 'response',
        '#expires': 'expires_at',
        '#completed': 'completed_at',
      },
      ExpressionAttributeValues: expect.objectContaining({
        ':pending': { S: 'PENDING' },
        ':token': { S: 'mine' },
        ':expiresAt': { N: String(NOW + 60) },
      }),
    });
  });

  it.each([
    [
      'complete',
      (repository: DynamoDbIdempotencyRepository) =>
        repository.complete({
          key: 'k',
          claimToken: 'mine',
          response: { statusCode: 201, headers: {} },
          ttlSeconds: 60,
        }),
    ],
    [
      'fail',
      (repository: DynamoDbIdempotencyRepository) => repository.fail({ key: 'k', claimToken: 'mine', ttlSeconds: 60 }),
    ],
    [
      'renew',
      (repository: DynamoDbIdempotencyRepository) =>
        repository.renew({ key: 'k', claimToken: 'mine', leaseSeconds: 60 }),
    ],
  ])('counts a %s refused by its guard under its own operation', async (operation, transition) => {
    const telemetry = new IdempotencyTelemetry();
    const rejected = jest.spyOn(telemetry, 'conditionRejected');
    const { repository, send } = mockedRepository(telemetry);
    send.mockRejectedValueOnce(conditionFailed(pendingItem) as never);
    await expect(transition(repository)).resolves.toMatchObject({ ok: false, reason: 'lease_lost' });
    expect(rejected.mock.calls).toEqual([['t', operation]]);
  });
});

describe('DynamoDbIdempotencyRepository layout options', () => {
  it('names itself in a layout error, for an application that builds it by hand', () => {
    const client = new DynamoDBClient({ region: 'us-east-1' });
    expect(
      () => new DynamoDbIdempotencyRepository({ client, tableName: 't', attributeNames: { owner: 'o' } as never }),
    ).toThrow(/^DynamoDbIdempotencyRepository: attributeNames\.owner is not a record attribute/);
  });
});

describe('DynamoDbIdempotencyRepository.scan with a mocked client', () => {
  const listed = async (pages: AsyncIterable<IdempotencyRecord[]>) => {
    const seen: IdempotencyRecord[][] = [];
    for await (const page of pages) seen.push(page);
    return seen;
  };

  it('reads page after page from where the last ended, until a page has no LastEvaluatedKey', async () => {
    const { repository, send } = mockedRepository();
    const [k, l] = [recordKey('POST /x', undefined, 'k'), recordKey('POST /x', undefined, 'l')];
    const next = { pk: { S: k } };
    send
      .mockResolvedValueOnce({ Items: [marshall({ ...pendingItem, pk: k })], LastEvaluatedKey: next } as never)
      .mockResolvedValueOnce({ Items: [marshall({ ...pendingItem, pk: l })] } as never);
    const pages = await listed(repository.scan({ pageSize: 1 }));
    expect(pages.map((page) => page.map((record) => record.key))).toEqual([[k], [l]]);
    const starts = send.mock.calls.map(([command]) => (command as ScanCommand).input.ExclusiveStartKey);
    expect(starts).toEqual([undefined, next]);
  });

  it("lists only items whose key has the module's shape, and skips (never rewrites) one that does not parse", async () => {
    const { repository, send } = mockedRepository();
    const k = recordKey('POST /x', undefined, 'k');
    send.mockResolvedValueOnce({
      Items: [
        marshall({ ...pendingItem, pk: 'ORDER#1' }), // the app's own item, with attributes named like the module's
        marshall({ ...pendingItem, pk: recordKey('POST /x', undefined, 'bad'), pending_since: 'yesterday' }),
        marshall({ ...pendingItem, pk: recordKey('POST /x', undefined, 'odd'), status: 'SHIPPED' }),
        marshall({ ...pendingItem, pk: k }),
      ],
    } as never);
    const pages = await listed(repository.scan({ pageSize: 10 }));
    expect(pages.map((page) => page.map((record) => record.key))).toEqual([[k]]);
  });

  it('refuses to list one partition of a table without a sort key, before calling DynamoDB', async () => {
    const { repository, send } = mockedRepository();
    await expect(listed(repository.scan({ pageSize: 1, partition: 'tenant' }))).rejects.toThrow(
      'records are listed by partition only in a table with a sort key (keySchema.sortKey)',
    );
    expect(send).not.toHaveBeenCalled();
  });
});

/**
 * `commitWith`'s transaction: DynamoDB cancels one for throttling or a conflict with a reason per action, which no
 * local server produces on demand (DynamoDB Local's own transaction behaviour is in test/transactions).
 */
describe('DynamoDbIdempotencyRepository commitWith transactions with a mocked client', () => {
  const write = (id: string, item: Record<string, unknown> = {}) => ({
    Put: { TableName: 'shop', Item: { pk: id, ...item } },
  });
  const complete = (repository: DynamoDbIdempotencyRepository, writes: ReturnType<typeof write>[]) =>
    repository.complete({
      key: 'k',
      claimToken: 'mine',
      response: { statusCode: 201, headers: {} },
      ttlSeconds: 60,
      writes,
    });
  const cancelled = (...codes: string[]) =>
    new TransactionCanceledException({
      message: 'Transaction cancelled',
      $metadata: {},
      CancellationReasons: codes.map((Code) => ({ Code, ...(Code === 'None' ? {} : { Message: `${Code} here` }) })),
    });

  it("counts a commit refused by the completion's guard as a refused completion, and not one refused by a write", async () => {
    const telemetry = new IdempotencyTelemetry();
    const rejected = jest.spyOn(telemetry, 'conditionRejected');
    const { repository, send } = mockedRepository(telemetry);
    send.mockRejectedValueOnce(cancelled('ConditionalCheckFailed', 'None') as never);
    await expect(complete(repository, [write('order-1')])).resolves.toMatchObject({ reason: 'commit_rejected' });
    expect(rejected).not.toHaveBeenCalled();
    send
      .mockRejectedValueOnce(cancelled('None', 'ConditionalCheckFailed') as never)
      .mockResolvedValueOnce({ Item: marshall(pendingItem) } as never);
    await expect(complete(repository, [write('order-2')])).resolves.toMatchObject({ reason: 'lease_lost' });
    expect(rejected.mock.calls).toEqual([['t', 'complete']]);
  });

  it("sends the writes then the guarded completion, and reports the record's new expiry", async () => {
    const { repository, send, sent } = mockedRepository();
    send.mockResolvedValueOnce({} as never);
    await expect(complete(repository, [write('order-1')])).resolves.toEqual({ ok: true, expiresAt: NOW + 60 });
    expect(sent()).toEqual(['TransactWriteCommand']);
    const [first, completion] = (send.mock.calls[0][0] as TransactWriteCommand).input.TransactItems ?? [];
    expect(first).toEqual(write('order-1'));
    expect(completion.Update).toMatchObject({
      Key: { pk: 'k' },
      ConditionExpression: '#status = :pending AND #token = :token',
      ExpressionAttributeValues: expect.objectContaining({ ':token': 'mine', ':expiresAt': NOW + 60 }),
    });
  });

  it('sends a retried commit of the same writes unchanged, token and expiry, even when the clock moved', async () => {
    // DynamoDB refuses a ClientRequestToken reused with other parameters (IdempotentParameterMismatch).
    const { repository, send, clock } = mockedRepository();
    send.mockRejectedValueOnce(cancelled('None', 'ThrottlingError') as never).mockResolvedValueOnce({} as never);
    const writes = [write('order-1')];
    await expect(complete(repository, writes)).rejects.toBeInstanceOf(IdempotencyStoreThrottledError);
    clock.advanceSeconds(5);
    await expect(complete(repository, writes)).resolves.toEqual({ ok: true, expiresAt: NOW + 60 });
    const [first, retried] = send.mock.calls.map(([command]) => (command as TransactWriteCommand).input);
    expect(retried).toEqual(first);
    expect(first.ClientRequestToken).toHaveLength(36);
  });

  it('writes the completion again without its body, under a token of its own, when DynamoDB refuses the item as too large', async () => {
    const { repository, send } = mockedRepository();
    const tooLarge = Object.assign(new Error('Item size has exceeded the maximum allowed size'), {
      name: 'ValidationException',
    });
    send.mockRejectedValueOnce(tooLarge as never).mockResolvedValueOnce({} as never);
    const big = { statusCode: 201, headers: {}, body: { receipt: 'x'.repeat(2000) } };
    const writes = [write('order-1')];
    await expect(
      repository.complete({ key: 'k', claimToken: 'mine', response: big, ttlSeconds: 60, writes }),
    ).resolves.toEqual({
      ok: true,
      expiresAt: NOW + 60,
    });
    const [first, second] = send.mock.calls.map(([command]) => (command as TransactWriteCommand).input);
    expect(second.ClientRequestToken).not.toBe(first.ClientRequestToken);
    const stored = (input: typeof first) => input.TransactItems![1].Update!.ExpressionAttributeValues![':response'];
    expect(decodeStoredResponse(stored(second) as string)).toMatchObject({ statusCode: 201, bodyOmitted: true });
    expect(decodeStoredResponse(stored(first) as Uint8Array)).toMatchObject({ body: big.body });
  });

  it.each(['ThrottlingError', 'ProvisionedThroughputExceeded'])(
    'reports a transaction cancelled by %s as throttling: a store fault the caller retries',
    async (code) => {
      const { repository, send } = mockedRepository();
      const error = cancelled('None', code, 'None');
      send.mockRejectedValueOnce(error as never);
      const commit = complete(repository, [write('order-1'), write('order-2')]);
      await expect(commit).rejects.toBeInstanceOf(IdempotencyStoreThrottledError);
      await expect(commit).rejects.toMatchObject({ operation: 'commit', dynamoErrorCode: code, cause: error });
    },
  );

  it('reports a transaction cancelled by a conflicting transaction as the store being unavailable', async () => {
    const { repository, send } = mockedRepository();
    const error = cancelled('TransactionConflict', 'None');
    send.mockRejectedValueOnce(error as never);
    const commit = complete(repository, [write('order-1')]);
    await expect(commit).rejects.toBeInstanceOf(IdempotencyStoreUnavailableError);
    await expect(commit).rejects.toMatchObject({
      operation: 'commit',
      dynamoErrorCode: 'TransactionConflict',
      cause: error,
    });
  });

  it.each([
    [
      'the first write',
      ['ValidationError', 'None', 'None'],
      'TransactWriteItems refused write 0 of commitWith: ValidationError: ValidationError here',
    ],
    [
      'a later write',
      ['None', 'ItemCollectionSizeLimitExceeded', 'None'],
      'TransactWriteItems refused write 1 of commitWith: ItemCollectionSizeLimitExceeded: ItemCollectionSizeLimitExceeded here',
    ],
    [
      'the completion',
      ['None', 'None', 'ValidationError'],
      'TransactWriteItems refused the completion: ValidationError: ValidationError here',
    ],
  ])('names the action when DynamoDB refuses %s for another reason', async (_, codes, message) => {
    const { repository, send } = mockedRepository();
    const error = cancelled(...codes);
    send.mockRejectedValueOnce(error as never);
    const commit = complete(repository, [write('order-1'), write('order-2')]);
    await expect(commit).rejects.toThrow(message);
    await expect(commit).rejects.toMatchObject({ cause: error });
    await expect(commit).rejects.not.toBeInstanceOf(IdempotencyStoreUnavailableError);
  });

  it('passes a cancellation without reasons on as it came', async () => {
    const { repository, send } = mockedRepository();
    const error = cancelled();
    send.mockRejectedValueOnce(error as never);
    await expect(complete(repository, [write('order-1')])).rejects.toBe(error);
  });

  describe('refuses a transaction over 4 MB before sending it, counting as DynamoDB does', () => {
    const refusal =
      /^commitWith: the transaction would be about \d+ bytes \(the writes and the stored response\), over DynamoDB's 4194304-byte limit; nothing was written\.$/;

    it.each([
      ['a string set', () => ({ tags: new Set(Array.from({ length: 5 }, (_, i) => `${i}`.repeat(1024 * 1024))) })],
      [
        'a list of 2.5 million one-character strings (a byte and a byte of overhead each)',
        () => ({ letters: Array.from({ length: 2_500_000 }, () => 'a') }),
      ],
      [
        '45 attribute names of 100 KB each',
        () => Object.fromEntries(Array.from({ length: 45 }, (_, i) => [`${i}`.padEnd(100 * 1024, 'n'), true])),
      ],
      [
        'a list of 500,000 sixteen-digit numbers',
        () => ({ amounts: Array.from({ length: 500_000 }, (_, i) => 1_000_000_000_000_000 + i) }),
      ],
    ])('%s', async (_, item) => {
      const { repository, send } = mockedRepository();
      await expect(complete(repository, [write('order-1', item())])).rejects.toThrow(refusal);
      expect(send).not.toHaveBeenCalled();
    });

    it('but not a list of 300,000 booleans (about 600 KB)', async () => {
      const { repository, send } = mockedRepository();
      send.mockResolvedValueOnce({} as never);
      const flags = Array.from({ length: 300_000 }, (_, i) => i % 2 === 0);
      await expect(complete(repository, [write('order-1', { flags })])).resolves.toMatchObject({ ok: true });
    });
  });
});

describe('DynamoDbIdempotencyRepository.supportsCommitWith with a mocked client', () => {
  /** The table described as `table`; the empty transaction answered by `probe` (its answers, in order). */
  function answering(send: jest.SpyInstance, table: object, ...probe: (() => Promise<unknown>)[]) {
    send.mockImplementation(((command: object) => {
      if (!(command instanceof TransactWriteCommand)) return Promise.resolve({ Table: table });
      return (probe.length > 1 ? probe.shift()! : probe[0])();
    }) as never);
    return () => send.mock.calls.filter(([command]) => command instanceof TransactWriteCommand).length;
  }

  it.each([
    ['an empty transaction that succeeds', () => Promise.resolve({}), true],
    [
      'a ValidationException (DynamoDB, DynamoDB Local)',
      () => Promise.reject(Object.assign(new Error('empty'), { name: 'ValidationException' })),
      true,
    ],
    [
      'an UnknownOperationException (dynalite)',
      () => Promise.reject(Object.assign(new Error('unknown'), { name: 'UnknownOperationException' })),
      false,
    ],
  ])('reads %s as the answer, and asks once', async (_, answer, supported) => {
    const { repository, send } = mockedRepository();
    const probes = answering(send, {}, answer);
    expect(await repository.supportsCommitWith()).toBe(supported);
    expect(await repository.supportsCommitWith()).toBe(supported);
    expect(probes()).toBe(1);
  });

  it('answers false on an MRSC global table the startup check found, without asking (it has no transactions)', async () => {
    const { repository, send } = mockedRepository();
    const mrsc = {
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      MultiRegionConsistency: 'STRONG',
    };
    const probes = answering(send, mrsc, () => Promise.resolve({}));
    await repository.checkReady(); // the startup check reads the mode
    expect(await repository.supportsCommitWith()).toBe(false);
    expect(await repository.expiresRecordsItself()).toBe(false);
    expect(probes()).toBe(0);
  });

  it('reports a fault as a store fault, not an answer, and asks again next time', async () => {
    const { repository, send } = mockedRepository();
    answering(
      send,
      {},
      () => Promise.reject(Object.assign(new Error('busy'), { name: 'InternalServerError' })),
      () => Promise.reject(Object.assign(new Error('empty'), { name: 'ValidationException' })),
    );
    await expect(repository.supportsCommitWith()).rejects.toMatchObject({
      name: 'IdempotencyStoreUnavailableError',
      operation: 'commit',
      dynamoErrorCode: 'InternalServerError',
    });
    expect(await repository.supportsCommitWith()).toBe(true);
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
        const body = JSON.stringify({
          __type: `com.amazonaws.dynamodb.v20120810#${scripted.type}`,
          message: scripted.type,
        });
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
  return {
    calls,
    repository: new DynamoDbIdempotencyRepository({ client, tableName: 't', clock: new ManualClock(NOW * 1000) }),
  };
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
    [
      'a refused connection',
      () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      'ECONNREFUSED',
    ],
  ])('reports %s as the store being unavailable', async (_, answer, code) => {
    const { repository } = clientAnswering(answer);
    await expect(repository.get({ key: 'k' })).rejects.toMatchObject({
      name: 'IdempotencyStoreUnavailableError',
      dynamoErrorCode: code,
    });
  });

  it.each([
    'ResourceNotFoundException',
    'AccessDeniedException',
    'ValidationException',
    'UnrecognizedClientException',
    'InvalidSignatureException',
  ])('reports %s as the store being misconfigured, not as a fault that may pass', async (type) => {
    const { calls, repository } = clientAnswering(() => ({ statusCode: 400, type }));
    await expect(repository.get({ key: 'k' })).rejects.toMatchObject({
      name: 'IdempotencyStoreMisconfiguredError',
      dynamoErrorCode: type,
    });
    expect(calls.count).toBe(1);
  });
});
