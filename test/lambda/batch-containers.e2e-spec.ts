import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { createIdempotencyTable } from '../support/table';
import { LambdaContainer } from './containers';
import { sqs } from './sqs-message';

/**
 * SQS batches on Lambda containers in processes of their own (batch-container.script.ts), on DynamoDB Local when the
 * run has it: a container times out in the middle of a batch and is frozen there, as the Lambda service freezes it; the
 * batch is delivered again to another container, whose partial batch response names only what must come again.
 */
describe('processBatch in Lambda containers, one frozen mid-batch', () => {
  const engine = ENGINES.at(-1)!;
  let endpoint: string;
  let stopStore: () => Promise<void>;
  let folder: string;
  let env: Record<string, string>;
  let containers: LambdaContainer[] = [];
  const script = join(__dirname, 'batch-container.script.ts');
  const runs = () => readFileSync(env.RUNS_FILE, { encoding: 'utf8', flag: 'a+' }).split('\n').filter(Boolean);

  beforeAll(async () => {
    ({ endpoint, stop: stopStore } = await startStore(engine));
    folder = mkdtempSync(join(tmpdir(), 'batches-'));
    env = {
      DYNAMODB_ENDPOINT: endpoint,
      IDEMPOTENCY_TABLE: uniqueTableName('batches'),
      RUNS_FILE: join(folder, 'runs'),
    };
    await createIdempotencyTable(localClient(endpoint), env.IDEMPOTENCY_TABLE);
    containers = await Promise.all([LambdaContainer.start(env, script), LambdaContainer.start(env, script)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(containers.map((container) => container.stop()));
    await stopStore();
    rmSync(folder, { recursive: true, force: true });
  });

  it('completed records are skipped, the frozen one is reported until its lease (cut at the deadline) has passed, then it runs once', async () => {
    const [frozen, next] = containers;
    const batch = { Records: [sqs('m-1', 'one'), sqs('m-2', 'slow two'), sqs('m-3', 'three')] };
    // 1.5 s for the batch: one is charged, the slow one is still running when the container is frozen.
    expect(await frozen.invoke(batch, 1500)).toEqual({ timedOut: true });
    expect(runs()).toEqual([`one ${frozen.pid}`]);

    // SQS delivers the batch again (the visibility timeout is the function's): m-2 is still held by the frozen
    // container until its deadline and the clock-skew margin, so it is reported; m-3 had not started, and runs now.
    const again = await next.invoke(batch, 10_000);
    expect(again).toMatchObject({ timedOut: false, response: { batchItemFailures: [{ itemIdentifier: 'm-2' }] } });
    expect(runs()).toEqual([`one ${frozen.pid}`, `three ${next.pid}`]);

    // Delivered once more after the lease has ended: m-2 runs, in the other container; nothing else runs again.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const last = await next.invoke(batch, 10_000);
    expect(last).toMatchObject({ timedOut: false, response: { batchItemFailures: [] } });
    expect(runs()).toEqual([`one ${frozen.pid}`, `three ${next.pid}`, `slow two ${next.pid}`]);
  });
});
