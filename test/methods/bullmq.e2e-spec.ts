import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { DynamoDbIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { ScriptProcess, startScript } from '../support/script-process';
import { describeWithRedis, Redis as RedisServer, startRedis } from '../support/redis';
import { createIdempotencyTable } from '../support/table';

/**
 * `@Idempotent()` on a BullMQ processor's `process(job)` (`@nestjs/bullmq`, a real Redis), with the workers in
 * processes of their own (bullmq-worker.script.ts): the same message delivered as two jobs to two workers runs once,
 * and a worker SIGKILLed between its steps leaves the job to another, which resumes after the first step.
 */
describeWithRedis('@Idempotent() on a BullMQ processor, two worker processes', () => {
  const engine = ENGINES.at(-1)!; // DynamoDB Local when the run has it
  let redis: RedisServer;
  let endpoint: string;
  let stopStore: () => Promise<void>;
  let effects: Redis;
  const workers: ScriptProcess[] = [];
  const queues: Queue[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    ({ endpoint, stop: stopStore } = await startStore(engine));
    effects = new Redis({ host: redis.host, port: redis.port });
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.kill()));
    await Promise.all(queues.splice(0).map((queue) => queue.close()));
    await effects.del('effects');
  });
  afterAll(async () => {
    effects.disconnect();
    await redis.stop();
    await stopStore();
  });

  async function setUp(name: string) {
    const tableName = uniqueTableName(name);
    await createIdempotencyTable(localClient(endpoint), tableName);
    const queueName = `${name}-${Date.now()}`;
    const queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
    queues.push(queue);
    const env = {
      REDIS_PORT: String(redis.port),
      QUEUE: queueName,
      DYNAMODB_ENDPOINT: endpoint,
      IDEMPOTENCY_TABLE: tableName,
    };
    return { tableName, queue, start: (extra: Record<string, string> = {}) => startWorker({ ...env, ...extra }) };
  }

  async function startWorker(env: Record<string, string>): Promise<ScriptProcess> {
    const worker = await startScript(join(__dirname, 'bullmq-worker.script.ts'), env);
    workers.push(worker);
    return worker;
  }

  async function finished(queue: Queue, ids: string[], timeoutMs = 30_000) {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
      // The state first, then the job: a job read before it completed has no return value yet.
      const states = await Promise.all(ids.map((id) => queue.getJobState(id)));
      if (states.every((state) => state === 'completed')) {
        return Promise.all(ids.map(async (id) => (await queue.getJob(id))!));
      }
      if (Date.now() > deadline) throw new Error(`jobs not completed: ${states.join(', ')}`);
    }
  }

  it('the same message as two jobs, on two workers: one charge, one shipment, both jobs answered with its result', async () => {
    const { queue, start } = await setUp('bull-twice');
    await Promise.all([start(), start()]);
    const payment = { messageId: 'm-1', amount: 42 };
    const [first, second] = await Promise.all([queue.add('pay', payment), queue.add('pay', payment)]);
    const jobs = await finished(queue, [first.id!, second.id!]);
    expect(jobs[0].returnvalue).toEqual(jobs[1].returnvalue);
    const done = await effects.lrange('effects', 0, -1);
    expect(done.map((line) => line.split(' ').slice(0, 2).join(' '))).toEqual(['charge m-1', 'ship m-1']);
  });

  it('a worker SIGKILLed between its steps: another takes the job over once the lease ends, and resumes after the charge', async () => {
    const { tableName, queue, start } = await setUp('bull-crash');
    const doomed = await start({ CRASH_AFTER_CHARGE: '1' });
    const job = await queue.add('pay', { messageId: 'm-2', amount: 7 });
    await doomed.exited;
    // The key is held by the dead worker: PENDING, its first step recorded.
    const repository = new DynamoDbIdempotencyRepository({ client: localClient(endpoint), tableName });
    const record = await repository.get({ key: recordKey('payments.process', undefined, 'm-2') });
    expect(record).toMatchObject({ status: 'PENDING' });
    const rescuer = await start();
    const [done] = await finished(queue, [job.id!]);
    const lines = await effects.lrange('effects', 0, -1);
    expect(lines).toEqual([`charge m-2 ${doomed.child.pid}`, `ship m-2 ${rescuer.child.pid}`]);
    expect(done.returnvalue).toEqual({ chargeId: 'ch-m-2', shippedBy: rescuer.child.pid });
  });
});
