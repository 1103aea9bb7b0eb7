import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { DynamoDBRecord, KinesisStreamRecord, SQSRecord } from 'aws-lambda';
import {
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyOutcomeEvent,
  IdempotencyService,
} from 'nestjs-dynamodb-idempotency';
import { processBatch } from 'nestjs-dynamodb-idempotency/lambda';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';

const QUEUE = 'arn:aws:sqs:eu-west-1:123456789012:payments';

function sqs(messageId: string, body: string, extra: Partial<SQSRecord> = {}): SQSRecord {
  return {
    messageId,
    receiptHandle: `rh-${messageId}`,
    body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: '1764900000000',
      SenderId: 'AIDA',
      ApproximateFirstReceiveTimestamp: '1764900000001',
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: QUEUE,
    awsRegion: 'eu-west-1',
    ...extra,
  };
}

function fifo(messageId: string, group: string, body: string): SQSRecord {
  const record = sqs(messageId, body, { eventSourceARN: `${QUEUE}.fifo` });
  record.attributes.MessageGroupId = group;
  return record;
}

function kinesis(sequenceNumber: string, data: string): KinesisStreamRecord {
  return {
    eventSource: 'aws:kinesis',
    eventID: `shardId-000000000000:${sequenceNumber}`,
    eventName: 'aws:kinesis:record',
    eventVersion: '1.0',
    invokeIdentityArn: 'arn:aws:iam::123456789012:role/consumer',
    awsRegion: 'eu-west-1',
    eventSourceARN: 'arn:aws:kinesis:eu-west-1:123456789012:stream/payments',
    kinesis: {
      kinesisSchemaVersion: '1.0',
      partitionKey: 'p',
      sequenceNumber,
      data: Buffer.from(data).toString('base64'),
      approximateArrivalTimestamp: 1764900000,
    },
  };
}

function streamRecord(sequence: string, id: string): DynamoDBRecord {
  return {
    eventID: `ev-${sequence}`,
    eventName: 'INSERT',
    eventSource: 'aws:dynamodb',
    dynamodb: { SequenceNumber: sequence, Keys: { pk: { S: id } }, NewImage: { pk: { S: id } } },
  };
}

/** A Lambda context whose time runs out: `remainingMs` at the start. */
function context(remainingMs = 30_000) {
  const deadline = Date.now() + remainingMs;
  return { awsRequestId: 'req-batch', getRemainingTimeInMillis: () => deadline - Date.now() };
}

/**
 * `processBatch` (nestjs-dynamodb-idempotency/lambda) on SQS, SQS FIFO, Kinesis and DynamoDB Streams events, against
 * the real store: each record once under its own key, the partial batch response naming exactly what must come again.
 */
describe.each(ENGINES)('processBatch (%s)', (engine) => {
  let endpoint: string;
  let stop: () => Promise<void>;
  const contexts: INestApplicationContext[] = [];
  const effects: string[] = [];
  /** The bodies the handler refuses (until a test lets them through). */
  const refused = new Set<string>();

  beforeAll(async () => {
    ({ endpoint, stop } = await startStore(engine));
  });
  afterAll(() => stop());
  beforeEach(() => {
    effects.length = 0;
    refused.clear();
  });
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((each) => each.close()));
  });

  /** A function's application (a container), on the table; the replay cache off. */
  async function container(tableName: string, options: IdempotencyModuleOptions = {}): Promise<IdempotencyService> {
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          client: localClient(endpoint),
          tableName,
          replayCache: { enabled: false },
          ...options,
        }),
      ],
    }).compile();
    const app = await moduleRef.init();
    contexts.push(app);
    return app.get(IdempotencyService);
  }

  async function table(name: string): Promise<string> {
    const tableName = uniqueTableName(name);
    await createIdempotencyTable(localClient(endpoint), tableName);
    return tableName;
  }

  /** A handler that records its effect, and throws for a body that says so. */
  const charge = async (record: { body?: string; kinesis?: { data: string }; eventID?: string }) => {
    const body =
      record.body ?? (record.kinesis ? Buffer.from(record.kinesis.data, 'base64').toString() : record.eventID!);
    if (body.includes('fail') || refused.has(body)) throw new Error(`the bank refused ${body}`);
    effects.push(body);
    return `charged ${body}`;
  };

  it('SQS: a failed record is reported alone; the redelivered batch skips what completed and runs the failed one again', async () => {
    const idempotency = await container(await table('batch-sqs'));
    const batch = { Records: [sqs('m-1', 'one'), sqs('m-2', 'two'), sqs('m-3', 'three')] };
    refused.add('two');
    const logs = new CapturedLogs();
    logs.start();
    const first = await processBatch(batch, context(), charge, { idempotency, operation: 'charge' }).finally(() =>
      logs.stop(),
    );
    expect(first).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-2' }] });
    expect(logs.at('warn')).toEqual([
      { msg: 'record failed; reported for redelivery', item: 'm-2', error: 'Error: the bank refused two' },
    ]);
    expect(effects).toEqual(['one', 'three']);
    refused.clear();
    expect(await processBatch(batch, context(), charge, { idempotency, operation: 'charge' })).toEqual({
      batchItemFailures: [],
    });
    expect(effects).toEqual(['one', 'three', 'two']);
  });

  it('SQS: duplicates of one key (a message attribute) inside a batch and across batches run once', async () => {
    const idempotency = await container(await table('batch-dup'));
    const keyed = (id: string, key: string) =>
      sqs(id, `pay ${key}`, { messageAttributes: { 'Idempotency-Key': { stringValue: key, dataType: 'String' } } });
    const options = { idempotency, operation: 'charge', keyAttribute: 'Idempotency-Key' };
    const first = await processBatch(
      { Records: [keyed('m-1', 'k-1'), keyed('m-2', 'k-1')] },
      context(),
      charge,
      options,
    );
    expect(first).toEqual({ batchItemFailures: [] });
    const second = await processBatch(
      { Records: [keyed('m-3', 'k-1'), keyed('m-4', 'k-2')] },
      context(),
      charge,
      options,
    );
    expect(second).toEqual({ batchItemFailures: [] });
    expect(effects).toEqual(['pay k-1', 'pay k-2']);
  });

  it('SQS: a record another consumer holds is reported, not run; a record without its key attribute is reported', async () => {
    const tableName = await table('batch-held');
    const [idempotency, other] = [await container(tableName), await container(tableName)];
    let release!: () => void;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const held = other.execute({ operation: 'charge', key: 'm-1', fingerprint: 'one' }, async () => {
      started();
      await new Promise<void>((resolve) => (release = resolve));
      effects.push('other consumer');
    });
    await running;
    const logs = new CapturedLogs();
    logs.start();
    const response = await processBatch({ Records: [sqs('m-1', 'one'), sqs('m-2', 'two')] }, context(), charge, {
      idempotency,
      operation: 'charge',
    }).finally(() => logs.stop());
    release();
    await held;
    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-1' }] });
    expect(effects).toEqual(['two', 'other consumer']);
    const keyless = await processBatch({ Records: [sqs('m-9', 'nine')] }, context(), charge, {
      idempotency,
      operation: 'charge',
      keyAttribute: 'Idempotency-Key',
    }).catch((error: unknown) => error);
    expect(keyless).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-9' }] });
  });

  it('SQS FIFO: after a failure the rest of its message group is reported, in order; other groups go on', async () => {
    const idempotency = await container(await table('batch-fifo'));
    const batch = [
      fifo('a-1', 'A', 'a1'),
      fifo('b-1', 'B', 'b1'),
      fifo('a-2', 'A', 'a2-fail'),
      fifo('a-3', 'A', 'a3'),
      fifo('b-2', 'B', 'b2'),
    ];
    const response = await processBatch({ Records: batch }, context(), charge, {
      idempotency,
      operation: 'charge',
      concurrency: 2,
    });
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'a-2' }, { itemIdentifier: 'a-3' }]);
    expect(effects.filter((effect) => effect.startsWith('a'))).toEqual(['a1']);
    expect(effects.filter((effect) => effect.startsWith('b'))).toEqual(['b1', 'b2']);
  });

  it('Kinesis and DynamoDB Streams: nothing after the first failure starts, and every record not completed is reported (the source resumes at the lowest)', async () => {
    const events: IdempotencyOutcomeEvent[] = [];
    const idempotency = await container(await table('batch-streams'), {
      onOutcome: (event) => void events.push(event),
    });
    const shard = [kinesis('100', 'k1'), kinesis('101', 'k2-fail'), kinesis('102', 'k3')];
    expect(await processBatch({ Records: shard }, context(), charge, { idempotency, operation: 'k' })).toEqual({
      batchItemFailures: [{ itemIdentifier: '101' }, { itemIdentifier: '102' }],
    });
    const changes = [streamRecord('200', 'x'), streamRecord('201', 'y')];
    const failing = async (record: DynamoDBRecord) => {
      if (record.dynamodb?.SequenceNumber === '200') throw new Error('down');
      effects.push(record.eventID!);
    };
    expect(await processBatch({ Records: changes }, context(), failing, { idempotency, operation: 's' })).toEqual({
      batchItemFailures: [{ itemIdentifier: '200' }, { itemIdentifier: '201' }],
    });
    expect(effects).toEqual(['k1']);
    expect(events.map(({ transport, operation, outcome }) => [transport, operation, outcome])).toEqual([
      ['kinesis', 'fn k', 'executed'],
      ['kinesis', 'fn k', 'executed'],
      ['dynamodb-streams', 'fn s', 'executed'],
    ]);
  });

  it('no record starts with less than minRemainingMs of the invocation left: those are reported', async () => {
    const idempotency = await container(await table('batch-deadline'));
    const slow = async (record: SQSRecord) => {
      await new Promise((resolve) => setTimeout(resolve, 400));
      effects.push(record.body);
    };
    const response = await processBatch(
      { Records: [sqs('m-1', 'one'), sqs('m-2', 'two'), sqs('m-3', 'three')] },
      context(1500),
      slow,
      { idempotency, operation: 'slow', minRemainingMs: 1000 },
    );
    expect(effects).toEqual(['one', 'two']);
    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-3' }] });
  });

  it('a throttled store: every record reported, none run', async () => {
    const tableName = await table('batch-throttled');
    const proxy: FaultProxy = await startFaultProxy(endpoint);
    try {
      const moduleRef = await Test.createTestingModule({
        imports: [
          IdempotencyModule.forRoot({
            client: localClient(proxy.endpoint, { maxAttempts: 1 }),
            tableName,
            replayCache: { enabled: false },
          }),
        ],
      }).compile();
      const app = await moduleRef.init();
      contexts.push(app);
      proxy.mode = 'throttle';
      const logs = new CapturedLogs();
      logs.start();
      const response = await processBatch({ Records: [sqs('m-1', 'one'), sqs('m-2', 'two')] }, context(), charge, {
        idempotency: app.get(IdempotencyService),
        operation: 'charge',
      }).finally(() => logs.stop());
      // Each record's claim throttled: the store's error, then the record reported for redelivery.
      expect(logs.at('error')).toEqual([
        expect.objectContaining({ msg: 'idempotency store call failed', operation: 'claim' }),
        expect.objectContaining({ msg: 'idempotency store call failed', operation: 'claim' }),
      ]);
      expect(logs.at('warn')).toEqual([
        expect.objectContaining({ item: 'm-1', error: expect.stringContaining('IdempotencyStoreThrottledError') }),
        expect.objectContaining({ item: 'm-2', error: expect.stringContaining('IdempotencyStoreThrottledError') }),
      ]);
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-1' }, { itemIdentifier: 'm-2' }] });
      expect(effects).toEqual([]);
    } finally {
      proxy.mode = 'pass';
      await proxy.stop();
    }
  });

  it('refuses an event of another source, and options without the service or the operation', async () => {
    const idempotency = await container(await table('batch-refused'));
    await expect(
      processBatch({ Records: [{ eventSource: 'aws:s3' }] } as never, context(), charge, {
        idempotency,
        operation: 'x',
      }),
    ).rejects.toThrow('processBatch takes SQS, Kinesis and DynamoDB Streams events; these records come from aws:s3');
    await expect(processBatch({ Records: [] }, context(), charge, { operation: 'x' } as never)).rejects.toThrow(
      'processBatch needs options.idempotency',
    );
    await expect(processBatch({ Records: [] }, context(), charge, { idempotency } as never)).rejects.toThrow(
      'processBatch needs options.operation',
    );
  });

  it('an option that is not a usable number, or of the wrong kind, is a TypeError at the call: nothing runs, nothing is reported done', async () => {
    const idempotency = await container(await table('batch-options'));
    const batch = { Records: [sqs('o-1', 'one'), sqs('o-2', 'two')] };
    const unsetEnvironment = process.env.BATCH_CONCURRENCY_NOT_SET;
    for (const [option, value, message] of [
      ['concurrency', NaN, 'processBatch: options.concurrency must be a whole number ≥ 1, got NaN'],
      ['concurrency', 0, 'options.concurrency must be a whole number ≥ 1, got 0'],
      ['concurrency', -2, 'options.concurrency must be a whole number ≥ 1, got -2'],
      ['concurrency', '4', 'options.concurrency must be a whole number ≥ 1, got "4"'],
      ['concurrency', Number(unsetEnvironment), 'options.concurrency must be a whole number ≥ 1, got NaN'],
      ['minRemainingMs', NaN, 'options.minRemainingMs must be a number of milliseconds ≥ 0, got NaN'],
      ['minRemainingMs', -1, 'options.minRemainingMs must be a number of milliseconds ≥ 0, got -1'],
      ['ttlSeconds', NaN, 'idempotency option ttlSeconds must be a positive whole number of seconds, got NaN'],
      ['pendingTtlSeconds', '60', 'idempotency option pendingTtlSeconds must be a positive whole number of seconds'],
      ['waitMs', -5, 'idempotency option waitMs must be a number of milliseconds ≥ 0, got -5'],
      ['key', 'messageId', 'options.key must be a function of the record, got "messageId"'],
      ['keyAttribute', '', "options.keyAttribute must be an SQS message attribute's name"],
      ['scope', { tenant: 1 }, 'options.scope must be a string or a number'],
    ] as const) {
      const options = { idempotency, operation: 'opt', [option]: value };
      const call = processBatch(batch, context(), charge, options as never);
      await expect(call).rejects.toThrow(TypeError);
      await expect(call).rejects.toThrow(message);
    }
    await expect(
      processBatch({ Records: [kinesis('1', 'k')] }, context(), charge, {
        idempotency,
        operation: 'opt',
        keyAttribute: 'Idempotency-Key',
      }),
    ).rejects.toThrow('options.keyAttribute must be left out for kinesis records');
    await expect(processBatch(batch, context(), charge, { idempotency, operation: 'x'.repeat(3000) })).rejects.toThrow(
      'operation makes an operation of 3003 bytes',
    );
    expect(effects).toEqual([]);
  });

  it('a malformed record is a TypeError naming its index and field, before any record runs', async () => {
    const idempotency = await container(await table('batch-malformed'));
    const run = (records: unknown[]) =>
      processBatch({ Records: records } as never, context(), charge, { idempotency, operation: 'bad' });
    const { kinesis: _dropped, ...withoutKinesis } = kinesis('2', 'k2');
    const { messageId: _id, ...withoutId } = sqs('x', 'two');
    await expect(run([kinesis('1', 'k1'), withoutKinesis])).rejects.toThrow(
      'processBatch: Records[1] (kinesis) has no kinesis.sequenceNumber (a non-empty string), got nothing; no record of the batch was run',
    );
    await expect(run([sqs('m-1', 'one'), withoutId])).rejects.toThrow(
      'processBatch: Records[1] (sqs) has no messageId (a non-empty string)',
    );
    await expect(run([sqs('m-1', 'one'), null])).rejects.toThrow('processBatch: Records[1] is null, not a record');
    await expect(run([sqs('m-1', 'one'), sqs('m-2', undefined as never)])).rejects.toThrow(
      'processBatch: Records[1] (sqs) has no body (a string)',
    );
    const { dynamodb: _change, ...withoutChange } = streamRecord('9', 'x');
    await expect(run([withoutChange])).rejects.toThrow('Records[0] (dynamodb-streams) has no dynamodb.SequenceNumber');
    expect(effects).toEqual([]);
    // A key chosen by a function needs no event id; a context without getRemainingTimeInMillis has no deadline.
    const { eventID: _event, ...withoutEventId } = kinesis('3', 'k3');
    const chosen = await processBatch({ Records: [withoutEventId] } as never, {} as never, charge, {
      idempotency,
      operation: 'bad',
      key: (record) => (record as KinesisStreamRecord).kinesis.sequenceNumber,
    });
    expect(chosen).toEqual({ batchItemFailures: [] });
    expect(effects).toEqual(['k3']);
  });

  it('a record completed before whose result could not be stored is done: not reported again, so a stream does not stall', async () => {
    const idempotency = await container(await table('batch-unstored'));
    const cyclic = async (record: KinesisStreamRecord) => {
      effects.push(record.kinesis.sequenceNumber);
      const response: Record<string, unknown> = { status: 200 };
      response.request = { response }; // an axios-like response: it refers to itself
      return response;
    };
    const shard = { Records: [kinesis('300', 'a'), kinesis('301', 'b')] };
    expect(await processBatch(shard, context(), cyclic, { idempotency, operation: 'cyc' })).toEqual({
      batchItemFailures: [],
    });
    const withFunction = async (record: SQSRecord) => ({ id: record.messageId, pay: () => 1 });
    const queue = { Records: [sqs('f-1', 'one')] };
    for (let delivery = 0; delivery < 3; delivery++) {
      expect(await processBatch(shard, context(), cyclic, { idempotency, operation: 'cyc' })).toEqual({
        batchItemFailures: [],
      });
      expect(await processBatch(queue, context(), withFunction, { idempotency, operation: 'fun' })).toEqual({
        batchItemFailures: [],
      });
    }
    expect(effects).toEqual(['300', '301']);
  });
});
