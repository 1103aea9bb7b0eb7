import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { localClient, uniqueTableName } from '../support/dynalite';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { createIdempotencyTable, createTableWithKey, scanTable } from '../support/table';

const ROUNDS = 10;
const REQUESTS_PER_ROUND = 3;

/** An app instance in its own process (optimistic-app.script.ts), and its URL. */
async function startInstance(env: Record<string, string>): Promise<{ url: string; process: ChildProcess }> {
  const root = join(__dirname, '..', '..');
  const child = fork(join(root, 'test/support/run-ts.cjs'), [join(__dirname, 'optimistic-app.script.ts')], {
    cwd: root,
    env: { ...process.env, AWS_EC2_METADATA_DISABLED: 'true', NODE_NO_WARNINGS: '1', ...env },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message: { url: string }) => resolve(message.url));
    child.once('exit', (code) => reject(new Error(`the instance exited (${code}) before it listened`)));
  });
  return { url, process: child };
}

/**
 * Optimistic mode whatever the moment a process dies: the order and its key's COMPLETED record are one transaction,
 * so there is either both or neither, never a PENDING record, and retries end with one order per key.
 */
describeOnDynamoDbLocal('optimistic mode through crashes on DynamoDB Local', () => {
  it(`SIGKILL at ${ROUNDS * REQUESTS_PER_ROUND} moments of first requests: orders and COMPLETED keys always together, one order per key after retries`, async () => {
    const { endpoint } = await startStore('dynamodb-local');
    const client = localClient(endpoint);
    const env = {
      DYNAMODB_ENDPOINT: endpoint,
      IDEMPOTENCY_TABLE: uniqueTableName('optimistic_crash'),
      ORDERS_TABLE: uniqueTableName('optimistic_crash_orders'),
    };
    await createIdempotencyTable(client, env.IDEMPOTENCY_TABLE);
    await createTableWithKey(client, env.ORDERS_TABLE);
    const order = (url: string, key: string) =>
      fetch(`${url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ item: key, delayMs: 150 }),
      }).then(
        async (response) => ({ status: response.status, body: await response.text() }),
        () => ({ status: 0, body: '' }), // the connection died with the process
      );
    const state = async () => {
      const records = (await scanTable(client, env.IDEMPOTENCY_TABLE)).map(({ item }) => item);
      const { Items = [] } = await client.send(new ScanCommand({ TableName: env.ORDERS_TABLE, ConsistentRead: true }));
      const orders = Items.map((item) => unmarshall(item) as { id: string; item: string });
      const completed = records.map((record) => JSON.parse(record.response).body as { id: string; item: string });
      return { records, orders, completed };
    };

    const keys: string[] = [];
    const answers: number[] = [];
    const retrier = await startInstance(env);
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const victim = await startInstance(env);
        const roundKeys = Array.from({ length: REQUESTS_PER_ROUND }, (_, i) => `crash-${round}-${i}`);
        keys.push(...roundKeys);
        // Requests 70 ms apart, one kill at a random moment of the round's slice of 0–450 ms (so the rounds cover it
        // all): each request is caught in its own phase (in the 150 ms handler, in the transaction, or answered).
        const attempts = roundKeys.map((key, i) => sleep(i * 70).then(() => order(victim.url, key)));
        await sleep(((round + Math.random()) * 450) / ROUNDS);
        victim.process.kill('SIGKILL');
        answers.push(...(await Promise.all(attempts)).map((answer) => answer.status));

        const { records, orders, completed } = await state();
        expect(records.map((record) => record.status)).toEqual(records.map(() => 'COMPLETED'));
        expect(orders.map((o) => o.id).sort()).toEqual(completed.map((c) => c.id).sort());
      }
      const retried = await Promise.all(keys.map((key) => order(retrier.url, key)));
      expect(retried.map((answer) => answer.status)).toEqual(keys.map(() => 201));
      const { records, orders, completed } = await state();
      expect(records).toHaveLength(keys.length);
      for (const key of keys) expect(orders.filter((o) => o.item === key)).toHaveLength(1);
      expect(orders.map((o) => o.id).sort()).toEqual(completed.map((c) => c.id).sort());
      // Some requests were answered before the kill and some were cut off: the kills landed at different moments.
      expect(answers.filter((status) => status === 201).length).toBeGreaterThan(0);
      expect(answers.filter((status) => status === 0).length).toBeGreaterThan(0);
    } finally {
      retrier.process.kill('SIGKILL');
      client.destroy();
    }
  }, 180_000);
});
