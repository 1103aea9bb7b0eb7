import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { localClient, uniqueTableName } from '../support/dynalite';
import { startStore } from '../support/engines';
import { createIdempotencyTable } from '../support/table';
import { LambdaContainer } from './containers';
import { sqs } from './sqs-message';

/**
 * A poisoned SQS record on Lambda containers in processes of their own (batch-container.script.ts, `maxCrashedOwners`
 * 2): a record whose handler kills its container is delivered again and again. After two dead containers, the next
 * delivery does not run it: it stays in `batchItemFailures` on every delivery (so SQS's redrive policy moves it to the
 * dead-letter queue after `maxReceiveCount`; leaving it out would delete it), while the other records run once.
 */
describe('processBatch: a record that kills its containers', () => {
  let endpoint: string;
  let stopStore: () => Promise<void>;
  let folder: string;
  let env: Record<string, string>;
  const started: LambdaContainer[] = [];
  const script = join(__dirname, 'batch-container.script.ts');
  const runs = () => readFileSync(env.RUNS_FILE, { encoding: 'utf8', flag: 'a+' }).split('\n').filter(Boolean);

  beforeAll(async () => {
    // On dynalite: DynamoDB Local's TTL deletes a dead owner's record as soon as its lease has ended, and the count of
    // crashed owners with it (AWS deletes expired items within days, long after a client's retries: docs/operating.md).
    ({ endpoint, stop: stopStore } = await startStore('dynalite'));
    folder = mkdtempSync(join(tmpdir(), 'poisoned-'));
    env = {
      DYNAMODB_ENDPOINT: endpoint,
      IDEMPOTENCY_TABLE: uniqueTableName('poisoned'),
      RUNS_FILE: join(folder, 'runs'),
      MAX_CRASHED_OWNERS: '2',
    };
    await createIdempotencyTable(localClient(endpoint), env.IDEMPOTENCY_TABLE);
    started.push(...(await Promise.all([1, 2, 3].map(() => LambdaContainer.start(env, script)))));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(started.map((container) => container.stop().catch(() => undefined)));
    await stopStore();
    rmSync(folder, { recursive: true, force: true });
  });

  it('two containers die on it; from the third delivery on it is reported, never run, and the others run once', async () => {
    const [first, second, third] = started;
    const poison = { Records: [sqs('m-1', 'crash one')] };
    // Each delivery's container dies in the handler: the invocation never answers (a timeout, as Lambda sees it). The
    // lease ends at the invocation's deadline; the next delivery takes the key over once the clock-skew margin passed.
    expect(await first.invoke(poison, 1500)).toEqual({ timedOut: true });
    await sleep(3500);
    expect(await second.invoke(poison, 1500)).toEqual({ timedOut: true });
    await sleep(3500);
    expect(runs()).toEqual([`crash one ${first.pid}`, `crash one ${second.pid}`]);

    const batch = { Records: [sqs('m-1', 'crash one'), sqs('m-2', 'two')] };
    for (let delivery = 0; delivery < 3; delivery++) {
      const answer = await third.invoke(batch, 10_000);
      expect(answer).toMatchObject({ timedOut: false, response: { batchItemFailures: [{ itemIdentifier: 'm-1' }] } });
    }
    expect(runs()).toEqual([`crash one ${first.pid}`, `crash one ${second.pid}`, `two ${third.pid}`]);
    expect(third.output).toContain('record poisoned');
  }, 60_000);
});
