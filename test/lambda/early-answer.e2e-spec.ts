import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createTableWithKey, scanTable } from '../support/table';
import { LambdaContainer } from './containers';
import { header, orderEvent, pathEvent } from './invocations';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An early answer on Lambda (issue 42 §1): a 300 ms timeout interceptor answers 408 while a 1.5 s handler still runs,
 * and the Lambda service freezes the container as soon as the function's promise resolves. The invocation must not
 * resolve before the handler's outcome is stored, or the record stays PENDING and a retry in another container runs
 * the handler again once the lease (cut at the deadline) has passed.
 */
describe('Lambda: an early answer with a container frozen on reply', () => {
  let store: Dynalite;
  let client: DynamoDBClient;
  let folder: string;
  let env: Record<string, string>;
  let first: LambdaContainer;
  let second: LambdaContainer;
  const script = join(__dirname, 'early-answer.script.ts');
  const runs = () => readFileSync(env.RUNS_FILE, 'utf8').split('\n').filter(Boolean);

  beforeAll(async () => {
    store = await startDynalite();
    client = localClient(store.endpoint);
    folder = mkdtempSync(join(tmpdir(), 'early-answer-'));
    env = {
      DYNAMODB_ENDPOINT: store.endpoint,
      IDEMPOTENCY_TABLE: uniqueTableName('early'),
      RUNS_FILE: join(folder, 'runs'),
    };
    await createTableWithKey(client, env.IDEMPOTENCY_TABLE, 'pk');
    [first, second] = await Promise.all([LambdaContainer.start(env, script), LambdaContainer.start(env, script)]);
    // Warm both (a 404 without a key), so a retry's claim is made when it is sent.
    await Promise.all([first, second].map((c) => c.invoke(pathEvent('api-gateway-v2', 'warm', '/none'))));
  }, 60_000);
  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()]);
    await store.stop();
    client?.destroy();
    rmSync(folder, { recursive: true, force: true });
  });

  it('the invocation ends once the outcome is stored: the client keeps its 408, every retry replays, the handler ran once', async () => {
    const key = 'early-answer-1';
    const event = () => withPath(orderEvent('api-gateway-v2', key, { amount: 42 }), '/charges');
    const started = Date.now();
    const deadline = started + 3000;
    const answered = await first.invoke(event(), 3000, { freezeOnReply: true });
    expect(answered).toMatchObject({ timedOut: false, response: { statusCode: 408 } });
    // The answer left only once the handler's work had settled and its outcome was stored.
    expect(runs()).toHaveLength(1);

    // The client retries in the other container while it gets 409, until well past the deadline and the skew margin.
    let retried = await second.invoke(event());
    while (!retried.timedOut && retried.response.statusCode === 409 && Date.now() < deadline + 5000) {
      await sleep(250);
      retried = await second.invoke(event());
    }
    if (retried.timedOut) throw new Error('the retry timed out');
    expect(retried.response.statusCode).toBe(201);
    expect(header(retried.response, 'idempotent-replayed')).toBe('true');
    expect(JSON.parse(retried.response.body)).toEqual({ id: runs()[0], amount: 42 });
    expect(runs()).toHaveLength(1);
    const records = (await scanTable(client, env.IDEMPOTENCY_TABLE)).filter(
      (record) => record.item.pk === recordKey('POST /charges', undefined, key),
    );
    expect(records.map((record) => record.item.status)).toEqual(['COMPLETED']);
    first.thaw();
  }, 30_000);
});

/** The recorded API Gateway v2 event, sent to `path`. */
function withPath(event: Record<string, unknown>, path: string): Record<string, unknown> {
  const context = event.requestContext as { http: { path: string } };
  context.http.path = path;
  event.rawPath = path;
  return event;
}
