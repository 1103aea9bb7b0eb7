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
          for (let delivery = 0; batch.length > 0; delivery++) {
            if (delivery > 10) throw new Error('the batch never drained');
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
              // The stream resumes at the first reported sequence number: one at most is reported.
              expect(failed.size).toBeLessThanOrEqual(1);
              const from = batch.findIndex((each) => 'kinesis' in each && failed.has(each.kinesis.sequenceNumber));
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
});
