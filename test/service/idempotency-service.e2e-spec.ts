import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { Test } from '@nestjs/testing';
import {
  ClaimInput,
  ClaimResult,
  IdempotencyClock,
  IdempotencyInFlightError,
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyMismatchError,
  IdempotencyModule,
  IdempotencyRecord,
  IdempotencyService,
  IdempotencyResultNotStoredError,
  IdempotencyStoreThrottledError,
  InMemoryIdempotencyRepository,
  withLambdaContext,
} from 'nestjs-dynamodb-idempotency';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { testClock } from '../support/clock';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { scopePartition } from '../../libs/idempotency/src/keys/record-key';
import { LAYOUTS } from '../support/layouts';
import { withInMemoryService } from '../support/service';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';

describe('IdempotencyService.execute on dynalite', () => {
  let dynamo: Dynalite;
  let proxy: FaultProxy;
  let service: IdempotencyService;
  let clock: ManualClock;
  let keys = 0;
  const newKey = () => `message-${++keys}`;

  beforeAll(async () => {
    dynamo = await startDynalite();
    proxy = await startFaultProxy(dynamo.endpoint);
    const tableName = uniqueTableName();
    await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
    clock = testClock();
    const moduleRef = await Test.createTestingModule({
      // No replay cache: every duplicate is answered from what DynamoDB (dynalite) stored and returns.
      imports: [
        IdempotencyModule.forRoot({ client: localClient(proxy.endpoint), tableName, replayCache: { enabled: false } }),
      ],
    })
      .overrideProvider(IdempotencyClock)
      .useValue(clock)
      .compile();
    service = moduleRef.get(IdempotencyService);
  });
  afterEach(() => {
    proxy.mode = 'pass';
  });
  afterAll(async () => {
    await proxy.stop();
    await dynamo.stop();
  });

  it('runs the function once and hands its result to every duplicate', async () => {
    const key = newKey();
    const fn = jest.fn(async () => ({ charged: 42, at: new Date(Date.UTC(2026, 0, 1)) }));
    const first = await service.execute({ operation: 'test', key, fingerprint: { amount: 42 } }, fn);
    const second = await service.execute({ operation: 'test', key, fingerprint: { amount: 42 } }, fn);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(first).toEqual({ charged: 42, at: new Date(Date.UTC(2026, 0, 1)) });
    expect(second).toEqual({ charged: 42, at: new Date(Date.UTC(2026, 0, 1)) }); // the types it had (typed encoding)
    expect((second as { at: unknown }).at).toBeInstanceOf(Date);
  });

  it.each([
    ['undefined', undefined],
    ['null', null],
    ['0', 0],
    ['false', false],
    ['an empty string', ''],
    ['an empty array', []],
    ['an empty object', {}],
  ])('round-trips %s exactly', async (_, value) => {
    const key = newKey();
    const fn = jest.fn(async () => value);
    await service.execute({ operation: 'test', key }, fn);
    const replayed = await service.execute({ operation: 'test', key }, fn);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(replayed).toStrictEqual(value);
  });

  it('hands duplicates the types the first result had, read back from DynamoDB (the typed encoding)', async () => {
    const key = newKey();
    const result = {
      charge: { id: 'ch_1', amount: 12n ** 20n, at: new Date(Date.UTC(2026, 11, 4)), note: undefined },
      lines: new Map([['sku-1', new Set([1, 2])]]),
      receipt: Buffer.from('%PDF'),
      rate: Number.NaN,
    };
    const fn = jest.fn(async () => result);
    await service.execute({ operation: 'typed', key }, fn);
    const replayed = await service.execute({ operation: 'typed', key }, fn);
    expect(fn).toHaveBeenCalledTimes(1);
    expect(replayed).toStrictEqual(result);
    expect(replayed).not.toBe(result);
  });

  it('records a result it cannot encode as done without a body, naming what could not be recorded', async () => {
    const key = newKey();
    const logs = new CapturedLogs();
    logs.start();
    try {
      const fn = jest.fn(async () => ({ id: 'ch_2', refund: () => 'not data' }));
      await expect(service.execute({ operation: 'typed', key }, fn)).resolves.toMatchObject({ id: 'ch_2' });
      await expect(service.execute({ operation: 'typed', key }, fn)).rejects.toBeInstanceOf(
        IdempotencyResultNotStoredError,
      );
      expect(fn).toHaveBeenCalledTimes(1);
      expect(JSON.stringify(logs.at('error'))).toContain('result.refund is a function, which cannot be recorded');
    } finally {
      logs.stop();
    }
  });

  it('refuses the same key with a different fingerprint', async () => {
    const key = newKey();
    await service.execute({ operation: 'test', key, fingerprint: { amount: 1 } }, async () => 'ok');
    await expect(
      service.execute({ operation: 'test', key, fingerprint: { amount: 2 } }, async () => 'again'),
    ).rejects.toBeInstanceOf(IdempotencyMismatchError);
  });

  it('reports a call still running as in flight, with its retryAfterSeconds', async () => {
    const key = newKey();
    let finish!: () => void;
    const first = service.execute(
      { operation: 'test', key, pendingTtlSeconds: 30 },
      () => new Promise<string>((resolve) => (finish = () => resolve('done'))),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    const duplicate = service.execute({ operation: 'test', key, retryAfterSeconds: 7 }, async () => 'second');
    await expect(duplicate).rejects.toBeInstanceOf(IdempotencyInFlightError);
    await expect(duplicate).rejects.toMatchObject({ retryAfterSeconds: 7 });
    finish();
    expect(await first).toBe('done');
    expect(await service.execute({ operation: 'test', key }, async () => 'third')).toBe('done');
  });

  it('waits for the running call with waitMs', async () => {
    const key = newKey();
    const first = service.execute(
      { operation: 'test', key },
      () => new Promise((resolve) => setTimeout(() => resolve('slow result'), 200)),
    );
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(await service.execute({ operation: 'test', key, waitMs: 3000 }, async () => 'never')).toBe('slow result');
    expect(await first).toBe('slow result');
  });

  it('lets a failed call be retried, and passes its error through unchanged', async () => {
    const key = newKey();
    const failure = new Error('provider down');
    await expect(service.execute({ operation: 'test', key }, async () => Promise.reject(failure))).rejects.toBe(
      failure,
    );
    expect(await service.execute({ operation: 'test', key }, async () => 'recovered')).toBe('recovered');
  });

  it('throws store errors, never runs the function, when DynamoDB throttles', async () => {
    proxy.mode = 'throttle';
    const fn = jest.fn(async () => 'x');
    await expect(service.execute({ operation: 'test', key: newKey() }, fn)).rejects.toBeInstanceOf(
      IdempotencyStoreThrottledError,
    );
    expect(fn).not.toHaveBeenCalled();
  });

  it('validates keys like the HTTP layer does', async () => {
    await expect(service.execute({ operation: 'test', key: '' }, async () => 1)).rejects.toBeInstanceOf(
      IdempotencyKeyInvalidError,
    );
    await expect(service.execute({ operation: 'test', key: 'a\u0000b' }, async () => 1)).rejects.toBeInstanceOf(
      IdempotencyKeyInvalidError,
    );
    const missing = service.execute({ operation: 'test', key: undefined as unknown as string }, async () => 1);
    await expect(missing).rejects.toBeInstanceOf(IdempotencyKeyMissingError);
    await expect(missing).rejects.toThrow('IdempotencyService.execute needs a key.');
  });

  it('names the operation when its settings are invalid', async () => {
    await expect(
      service.execute({ operation: 'charge-card', key: newKey(), waitMs: -1 }, async () => 1),
    ).rejects.toThrow(
      'IdempotencyService.execute(charge-card): idempotency option waitMs must be a number of milliseconds ≥ 0, got -1',
    );
  });

  it("puts a record in its scope's partition on a single-table layout, or in the partition key value the call names", async () => {
    const client = localClient(dynamo.endpoint);
    const tableName = uniqueTableName();
    const layout = LAYOUTS['single-table'];
    await createIdempotencyTable(client, tableName, layout);
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ client, tableName, ...layout })],
    }).compile();
    try {
      const singleTable = (await moduleRef.init()).get(IdempotencyService);
      await singleTable.execute({ operation: 'test', key: 'scoped', scope: 'tenant-a' }, async () => 'a');
      await singleTable.execute({ operation: 'test', key: 'named', partitionKeyValue: 'ORDER#1' }, async () => 'b');
      const { Items = [] } = await client.send(new ScanCommand({ TableName: tableName }));
      const partitions = Items.map((item) => item.PK.S).sort();
      expect(partitions).toEqual([scopePartition(layout.keyPrefix!, 'tenant-a'), 'ORDER#1'].sort());
    } finally {
      await moduleRef.close();
    }
  });

  it('keeps scopes apart', async () => {
    const key = newKey();
    expect(await service.execute({ operation: 'test', key, scope: 'tenant-a' }, async () => 'a')).toBe('a');
    expect(await service.execute({ operation: 'test', key, scope: 'tenant-b' }, async () => 'b')).toBe('b');
  });
});

describe('IdempotencyService.call', () => {
  it("carries the Lambda invocation's deadline, in epoch seconds, and none outside an invocation", async () => {
    await withInMemoryService(async (service) => {
      expect(service.call('k', 'fp', {})).not.toHaveProperty('deadline');
      const remainingMs = 20_000;
      const described = withLambdaContext(async () => ({ call: service.call('k', 'fp', {}), now: Date.now() }));
      const { call, now } = await described({}, { getRemainingTimeInMillis: () => remainingMs });
      expect(call.deadline).toBeGreaterThanOrEqual(Math.floor((now - 1000 + remainingMs) / 1000));
      expect(call.deadline).toBeLessThanOrEqual(Math.floor((now + remainingMs) / 1000));
    });
  });
});

describe('IdempotencyService, a claim refused by a record that is claimable by the time it is read', () => {
  /** Refuses the first `refusals` claims with a FAILED record: its owner released the key after the store's answer. */
  class ReleasedMeanwhileRepository extends InMemoryIdempotencyRepository {
    refusals = 0;
    claims = 0;

    override async claim(input: ClaimInput): Promise<ClaimResult> {
      this.claims += 1;
      if (this.refusals-- <= 0) return super.claim(input);
      const now = Math.floor(Date.now() / 1000);
      const existing: IdempotencyRecord = {
        key: input.key,
        status: 'FAILED',
        expiresAt: now + 300,
        claimToken: 'the-owner',
        fingerprint: input.fingerprint,
        pendingSince: now - 1,
      };
      return { claimed: false, existing };
    }
  }

  it('claims again at once, even without a wait budget, and runs the function once', async () => {
    const repository = new ReleasedMeanwhileRepository();
    repository.refusals = 1;
    const fn = jest.fn(async () => 'done');
    await withInMemoryService(async (service) => {
      await expect(service.execute({ operation: 'test', key: 'released-once' }, fn)).resolves.toBe('done');
    }, repository);
    expect(repository.claims).toBe(2);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it('answers in flight once a claim again, past the wait budget, is refused too', async () => {
    const repository = new ReleasedMeanwhileRepository();
    repository.refusals = 2;
    const fn = jest.fn(async () => 'done');
    await withInMemoryService(async (service) => {
      await expect(service.execute({ operation: 'test', key: 'released-twice' }, fn)).rejects.toBeInstanceOf(
        IdempotencyInFlightError,
      );
    }, repository);
    expect(repository.claims).toBe(2);
    expect(fn).not.toHaveBeenCalled();
  });
});
