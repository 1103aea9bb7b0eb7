import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import fc from 'fast-check';
import { IdempotencyModule, IdempotencyService, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { BatchRecord, KinesisRecordLike, processBatch } from 'nestjs-dynamodb-idempotency/lambda';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { createIdempotencyTable } from '../support/table';
import { INPUT_RUNS, INPUT_SEED } from './inputs';

/**
 * `processBatch`'s inputs, generated: batches of SQS (standard and FIFO) and Kinesis records in several message
 * groups, a record delivered twice in one batch, handlers that fail a record's first attempts, several records at once.
 * Each batch is delivered again as its partial batch response says (a stream from its reported sequence number on)
 * until nothing is reported. Checked on every run: every message ran exactly once, a FIFO group's messages ran in the
 * group's order, a stream's in the stream's order.
 */
const runs = INPUT_RUNS;
const seed = INPUT_SEED;

type Kind = 'sqs' | 'sqs-fifo' | 'kinesis';

interface Message {
  id: string;
  group: string;
  /** How many of its first attempts fail. */
  failures: number;
}

function record(kind: Kind, message: Message, sequence: number): BatchRecord {
  if (kind === 'kinesis') {
    return {
      eventSource: 'aws:kinesis',
      eventID: `shard-0:${message.id}`,
      kinesis: { sequenceNumber: String(1000 + sequence), data: Buffer.from(message.id).toString('base64') },
    };
  }
  return {
    eventSource: 'aws:sqs',
    messageId: message.id,
    body: message.id,
    eventSourceARN: `arn:aws:sqs:eu-west-1:123456789012:orders${kind === 'sqs-fifo' ? '.fifo' : ''}`,
    attributes: { MessageGroupId: message.group },
  };
}

const STORES = ['in-memory', ...ENGINES] as const;

describe.each(STORES)('generated batches on the %s store', (store) => {
  let endpoint: string | undefined;
  let stop: (() => Promise<void>) | undefined;
  const contexts: INestApplicationContext[] = [];
  let run = 0;

  beforeAll(async () => {
    if (store !== 'in-memory') ({ endpoint, stop } = await startStore(store));
  });
  afterAll(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
    await stop?.();
  });

  async function service(): Promise<IdempotencyService> {
    let options: object = { repository: new InMemoryIdempotencyRepository() };
    if (endpoint) {
      const tableName = uniqueTableName('batches');
      await createIdempotencyTable(localClient(endpoint), tableName);
      options = { client: localClient(endpoint), tableName };
    }
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ ...options, replayCache: { enabled: false } })],
    }).compile();
    const context = await moduleRef.init();
    contexts.push(context);
    return context.get(IdempotencyService);
  }

  it(`every message runs exactly once across redeliveries, in its group's (or stream's) order (${runs} runs)`, async () => {
    const idempotency = await service();
    const message = fc.record({
      group: fc.constantFrom('A', 'B', 'C'),
      failures: fc.oneof(
        { weight: 3, arbitrary: fc.constant(0) },
        { weight: 1, arbitrary: fc.integer({ min: 1, max: 2 }) },
      ),
      twice: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Kind>('sqs', 'sqs-fifo', 'kinesis'),
        fc.array(message, { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 3 }),
        async (kind, generated, concurrency) => {
          const prefix = `${store}-${++run}`;
          const messages: Message[] = generated.map(({ group, failures }, i) => ({
            id: `${prefix}-${i}`,
            group,
            failures,
          }));
          // A record delivered twice in one batch (at-least-once delivery), right after itself.
          const delivered = generated.flatMap((each, i) => (each.twice && kind !== 'kinesis' ? [i, i] : [i]));
          const left = new Map(messages.map((each) => [each.id, each.failures]));
          const ran: Message[] = [];
          let batch = delivered.map((i, sequence) => record(kind, messages[i], sequence));
          // Every delivery that reports a record spends at least one failing attempt (a stream or a FIFO group stops at
          // its first failure: 8 messages failing twice each take 17 deliveries), or reports a record delivered twice
          // whose first copy was still running: it drains within one delivery per failure, one per doubled record, and
          // one more.
          const deliveries =
            messages.reduce((sum, each) => sum + each.failures, 0) + delivered.length - messages.length;
          for (let delivery = 0; batch.length > 0; delivery++) {
            if (delivery > deliveries) throw new Error(`the batch did not drain in ${deliveries + 1} deliveries`);
            const { batchItemFailures } = await processBatch(
              { Records: batch },
              undefined,
              async (each) => {
                const id =
                  'messageId' in each
                    ? each.messageId
                    : Buffer.from((each as KinesisRecordLike).kinesis.data, 'base64').toString();
                const failures = left.get(id)!;
                if (failures > 0) {
                  left.set(id, failures - 1);
                  throw new Error(`attempt failed (${failures} left)`);
                }
                ran.push(messages.find((each) => each.id === id)!);
              },
              { idempotency, operation: 'orders', concurrency },
            );
            const failed = new Set(batchItemFailures.map(({ itemIdentifier }) => itemIdentifier));
            if (kind === 'kinesis') {
              // The stream resumes at the lowest reported sequence number (Lambda's checkpoint): everything from the
              // first record not completed on is reported, nothing before it.
              const sequence = (each: BatchRecord) => (each as KinesisRecordLike).kinesis.sequenceNumber;
              const from = batch.findIndex((each) => failed.has(sequence(each)));
              expect([...failed].sort()).toEqual(from < 0 ? [] : batch.slice(from).map(sequence).sort());
              batch = from < 0 ? [] : batch.slice(from);
            } else batch = batch.filter((each) => 'messageId' in each && failed.has(each.messageId));
          }
          // Exactly once each.
          expect(ran.map((each) => each.id).sort()).toEqual(messages.map((each) => each.id).sort());
          const order = (list: Message[], group?: string) =>
            list.filter((each) => group === undefined || each.group === group).map((each) => each.id);
          if (kind === 'kinesis') expect(order(ran)).toEqual(order(messages));
          if (kind === 'sqs-fifo') {
            for (const group of ['A', 'B', 'C']) expect(order(ran, group)).toEqual(order(messages, group));
          }
        },
      ),
      { numRuns: runs, seed },
    );
  }, 300_000);

  it(`options, records and results as callers give them: a TypeError before anything runs, or every record done or reported (${runs} runs)`, async () => {
    const idempotency = await service();
    /** What an option arrives as: a number, NaN, a string (an environment variable), nothing. */
    const optionValue = fc.oneof(
      fc.integer({ min: -2, max: 4 }),
      fc.double({ min: -1, max: 4, noNaN: false }),
      fc.constantFrom<unknown>(NaN, Infinity, '2', '', undefined, null),
    );
    /** A record as a caller's event may carry it: whole, or with a field missing, or not a record at all. */
    const damage = fc.constantFrom('none', 'none', 'none', 'no-id', 'no-body', 'null', 'string');
    /** What the handler returns: JSON, a value with a function member, one that refers to itself. */
    const result = fc.constantFrom('json', 'function', 'cycle');
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Kind>('sqs', 'kinesis'),
        fc.array(fc.tuple(damage, result), { minLength: 1, maxLength: 5 }),
        optionValue,
        optionValue,
        async (kind, shapes, concurrency, minRemainingMs) => {
          const prefix = `${store}-shaped-${++run}`;
          const ran: string[] = [];
          const records = shapes.map(([how], i): unknown => {
            const whole = record(kind, { id: `${prefix}-${i}`, group: 'A', failures: 0 }, i) as Record<string, any>;
            if (how === 'null') return null;
            if (how === 'string') return 'not a record';
            if (how === 'no-id') return kind === 'sqs' ? { ...whole, messageId: undefined } : { ...whole, kinesis: {} };
            if (how === 'no-body')
              return kind === 'sqs'
                ? { ...whole, body: undefined }
                : { ...whole, kinesis: { sequenceNumber: whole.kinesis.sequenceNumber } };
            return whole;
          });
          const handler = async (each: BatchRecord) => {
            const i = records.indexOf(each);
            ran.push(String(i));
            if (shapes[i][1] === 'function') return { id: i, format: () => String(i) };
            if (shapes[i][1] === 'cycle') {
              const response: Record<string, unknown> = { id: i };
              response.self = response;
              return response;
            }
            return { id: i };
          };
          const options = { idempotency, operation: 'shaped', concurrency, minRemainingMs } as never;
          // The documented rules, written apart from the library's code.
          const usable =
            (concurrency === undefined || (Number.isInteger(concurrency) && (concurrency as number) >= 1)) &&
            (minRemainingMs === undefined ||
              (typeof minRemainingMs === 'number' && Number.isFinite(minRemainingMs) && minRemainingMs >= 0)) &&
            shapes.every(([how]) => how === 'none');
          const deliver = () => processBatch({ Records: records } as never, undefined, handler, options);
          if (!usable) {
            await expect(deliver()).rejects.toThrow(TypeError);
            expect(ran).toEqual([]);
            return;
          }
          // Delivered again as long as anything is reported: a completed record (its result stored or not) is done.
          for (let delivery = 0; delivery < 3; delivery++) {
            const { batchItemFailures } = await deliver();
            expect(batchItemFailures).toEqual([]);
          }
          // Each record once; in any order (records of a standard queue run `concurrency` at a time).
          expect([...ran].sort()).toEqual(shapes.map((_, i) => String(i)));
        },
      ),
      { numRuns: runs, seed },
    );
  }, 300_000);
});
