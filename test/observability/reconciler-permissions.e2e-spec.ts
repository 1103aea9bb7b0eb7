import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbIdempotencyRepository, reconcileTable } from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { testClock } from '../support/clock';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { createIdempotencyTable } from '../support/table';

const REPO = join(__dirname, '..', '..');

/** The reconciler's IAM policy in docs/operating.md, as an action → resources map (the sample ARN's table `T`). */
function documentedPolicy(): { actions: string[]; resources: string[] } {
  const text = readFileSync(join(REPO, 'docs', 'operating.md'), 'utf8');
  const block = /The reconciler job \(CronJob[\s\S]*?```json\n([\s\S]*?)\n```/.exec(text)?.[1];
  if (!block) throw new Error('docs/operating.md has no reconciler policy');
  const [statement] = JSON.parse(block).Statement as { Action: string[]; Resource: string | string[] }[];
  const resources = ([] as string[]).concat(statement.Resource).map((arn) => arn.replace(/^.*:table\//, 'table/'));
  return { actions: statement.Action, resources };
}

/** Every call `client` sends, as the IAM action and resource it needs (`table/<name>`, or `table/<name>/index/<index>`). */
function recordCalls(client: DynamoDBClient): Set<string> {
  const calls = new Set<string>();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const { TableName, IndexName } = args.input as { TableName: string; IndexName?: string };
      const action = `dynamodb:${String(context.commandName).replace(/Command$/, '')}`;
      calls.add(`${action} table/${TableName}${IndexName ? `/index/${IndexName}` : ''}`);
      return next(args);
    },
    { step: 'initialize', name: 'recordCalls' },
  );
  return calls;
}

/** Whether an IAM resource pattern (`*` any characters) matches a resource. */
function matches(pattern: string, resource: string): boolean {
  const escaped = pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*');
  return new RegExp(`^${escaped}$`).test(resource);
}

/**
 * The IAM policy docs/operating.md gives the reconciler job allows every call a sweep makes, with the index of keys in
 * flight and without it (a policy that lacks one shows only in production, as a sweep that fails); the ops files name
 * the same actions.
 */
describe.each(ENGINES)('the reconciler’s documented permissions (%s)', (engine) => {
  let stop: () => Promise<void>;
  let endpoint: string;

  beforeAll(async () => {
    ({ endpoint, stop } = await startStore(engine));
  }, 60_000);
  afterAll(() => stop());

  it.each([
    ['with the index of keys in flight', {}],
    ['without it', { inFlightIndex: false as const }],
  ])('allow every call of a sweep of a table %s', async (_, layout) => {
    const tableName = uniqueTableName('perms');
    await createIdempotencyTable(localClient(endpoint), tableName, layout);
    const clock = testClock();
    const writer = new DynamoDbIdempotencyRepository({ client: localClient(endpoint), tableName, clock });
    await writer.claim({ key: recordKey('POST /orders', undefined, 'stuck'), fingerprint: 'f', leaseSeconds: 30 });
    clock.advanceSeconds(60);
    const client = localClient(endpoint);
    const calls = recordCalls(client);
    const result = await reconcileTable({ client, tableName }, { maxPagesPerSecond: 1000 }, clock);
    expect(result).toMatchObject({ stuckPending: 1, released: 1, indexed: !('inFlightIndex' in layout) });

    const { actions, resources } = documentedPolicy();
    const allowed = (call: string) => {
      const [action, resource] = call.split(' ');
      const documented = resource.replace(tableName, 'idempotency_keys');
      return actions.includes(action) && resources.some((pattern) => matches(pattern, documented));
    };
    expect([...calls].filter((call) => !allowed(call))).toEqual([]);
    expect(calls.size).toBeGreaterThanOrEqual(3); // DescribeTable, a read, the release
  });

  it('the ops files give the reconciler the same actions', () => {
    const { actions } = documentedPolicy();
    for (const file of [
      'ops/aws/reconcile-scheduler.yaml',
      'ops/aws/reconcile-ecs-scheduled-task.json',
      'ops/aws/reconcile-lambda.mjs',
      'ops/kubernetes/reconcile-cronjob.yaml',
    ]) {
      const text = readFileSync(join(REPO, file), 'utf8');
      expect({ file, missing: actions.filter((action) => !text.includes(action)) }).toEqual({ file, missing: [] });
    }
  });
});
