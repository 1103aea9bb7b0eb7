import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateQueueCommand, GetQueueAttributesCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDbIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { ScriptProcess, startScript } from '../support/script-process';
import { Sqs, startSqs } from '../support/sqs';
import { createIdempotencyTable } from '../support/table';

/**
 * `@Idempotent()` on an `@ssut/nestjs-sqs` `@SqsMessageHandler` (sqs-consumer underneath) against a local SQS
 * (sqslite), with the consumers in processes of their own (sqs-consumer.script.ts): a payment sent twice runs once,
 * and a consumer SIGKILLed between its steps leaves the payment to another consumer, which resumes after the first step.
 * sqslite never makes a received message visible again (it has no visibility timeout), so SQS's redelivery of the dead
 * consumer's message is played by sending it again with the same `Idempotency-Key`: the key the handler reads.
 */
describe('@Idempotent() on an @SqsMessageHandler, two consumer processes', () => {
  const engine = ENGINES.at(-1)!; // DynamoDB Local when the run has it
  let sqs: Sqs;
  let client: SQSClient;
  let endpoint: string;
  let stopStore: () => Promise<void>;
  const consumers: ScriptProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'sqs-effects-'));

  beforeAll(async () => {
    sqs = await startSqs();
    client = sqs.client();
    ({ endpoint, stop: stopStore } = await startStore(engine));
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((consumer) => consumer.kill()));
  });
  afterAll(async () => {
    client.destroy();
    await sqs.stop();
    await stopStore();
  });

  async function setUp(name: string) {
    const tableName = uniqueTableName(name);
    await createIdempotencyTable(localClient(endpoint), tableName);
    const { QueueUrl } = await client.send(
      new CreateQueueCommand({ QueueName: `${name}-${Date.now()}`, Attributes: { VisibilityTimeout: '2' } }),
    );
    const effects = join(dir, `${tableName}.log`);
    writeFileSync(effects, '');
    const env = {
      SQS_ENDPOINT: sqs.endpoint,
      QUEUE_URL: QueueUrl!,
      DYNAMODB_ENDPOINT: endpoint,
      IDEMPOTENCY_TABLE: tableName,
      EFFECTS: effects,
    };
    return {
      tableName,
      queueUrl: QueueUrl!,
      lines: () => readFileSync(effects, 'utf8').split('\n').filter(Boolean),
      start: async (extra: Record<string, string> = {}) => {
        const consumer = await startScript(join(__dirname, 'sqs-consumer.script.ts'), { ...env, ...extra });
        consumers.push(consumer);
        return consumer;
      },
    };
  }

  const send = (queueUrl: string, body: object, key?: string) =>
    client.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: JSON.stringify(body),
        MessageAttributes: key ? { 'Idempotency-Key': { DataType: 'String', StringValue: key } } : undefined,
      }),
    );

  /** Until the queue holds `left` messages, received or not (sqslite counts both): the others deleted, answered. */
  async function drained(queueUrl: string, left = 0, timeoutMs = 30_000) {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
      const { Attributes } = await client.send(
        new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessages'] }),
      );
      if (Number(Attributes!.ApproximateNumberOfMessages) === left) return;
      if (Date.now() > deadline) throw new Error(`messages left in the queue: ${JSON.stringify(Attributes)}`);
    }
  }

  it('a payment sent twice (two messages, one Idempotency-Key), on two consumers: one charge, one shipment, both messages deleted', async () => {
    const { queueUrl, lines, start } = await setUp('sqs-twice');
    await Promise.all([start(), start()]);
    const payment = { orderId: 'o-1', amount: 42 };
    await Promise.all([send(queueUrl, payment, 'pay-o-1'), send(queueUrl, payment, 'pay-o-1')]);
    await drained(queueUrl);
    expect(lines().map((line) => line.split(' ').slice(0, 2).join(' '))).toEqual(['charge pay-o-1', 'ship pay-o-1']);
  });

  it('a consumer SIGKILLed between its steps: the payment delivered again reaches another, which resumes after the charge', async () => {
    const { tableName, queueUrl, lines, start } = await setUp('sqs-crash');
    const doomed = await start({ CRASH_AFTER_CHARGE: '1' });
    const payment = { orderId: 'o-2', amount: 7 };
    await send(queueUrl, payment, 'pay-o-2');
    await doomed.exited;
    // The key is held by the dead consumer: PENDING, its charge recorded.
    const repository = new DynamoDbIdempotencyRepository({ client: localClient(endpoint), tableName });
    const record = await repository.get({ key: recordKey('payments.handle', undefined, 'pay-o-2') });
    expect(record).toMatchObject({ status: 'PENDING' });
    const rescuer = await start();
    await send(queueUrl, payment, 'pay-o-2');
    await drained(queueUrl, 1); // the dead consumer's copy stays received for ever in sqslite; the new one is deleted
    expect(lines()).toEqual([`charge pay-o-2 ${doomed.child.pid}`, `ship pay-o-2 ${rescuer.child.pid}`]);
  });

  it('without an Idempotency-Key attribute the key is the MessageId: two messages with one body are two payments', async () => {
    const { queueUrl, lines, start } = await setUp('sqs-message-id');
    await start();
    const sent = await Promise.all([send(queueUrl, { orderId: 'o-3' }), send(queueUrl, { orderId: 'o-3' })]);
    await drained(queueUrl);
    const ids = sent.map(({ MessageId }) => MessageId!).sort();
    expect(
      lines()
        .filter((line) => line.startsWith('charge'))
        .map((line) => line.split(' ')[1])
        .sort(),
    ).toEqual(ids);
  });
});
