import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { BatchWriteItemCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';

const ROOT = join(__dirname, '..', '..');
const RECORDS = 1_500;

/**
 * The CLI's output read through a pipe by another program, as a script reads `keys:list`: every line arrives before
 * the process exits (a plain exit drops what is still queued for a pipe).
 */
describe('the CLI read through a pipe', () => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  const tableName = uniqueTableName('clipipe');

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    await createIdempotencyTable(client, tableName);
    const now = Math.floor(Date.now() / 1000);
    for (let first = 0; first < RECORDS; first += 25) {
      const items = Array.from({ length: 25 }, (_, i) => ({
        pk: { S: recordKey('POST /orders', undefined, `pipe-${first + i}`) },
        status: { S: 'COMPLETED' },
        expires_at: { N: String(now + 3600) },
        claim_token: { S: `token-${first + i}` },
        fingerprint: { S: 'f'.repeat(64) },
        pending_since: { N: String(now) },
        completed_at: { N: String(now) },
      }));
      await client.send(
        new BatchWriteItemCommand({ RequestItems: { [tableName]: items.map((Item) => ({ PutRequest: { Item } })) } }),
      );
    }
  }, 60_000);
  afterAll(async () => {
    client.destroy();
    await dynamo.stop();
  });

  it('keys:list of 1,500 records: every line reaches the reader, exit 0', async () => {
    const child = spawn(
      process.execPath,
      [
        join(ROOT, 'test/support/run-ts.cjs'),
        join(ROOT, 'libs/idempotency/src/cli/main.ts'),
        'keys:list',
        '--table',
        tableName,
        '--endpoint',
        dynamo.endpoint,
        '--region',
        'us-east-1',
      ],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          AWS_ACCESS_KEY_ID: 'local',
          AWS_SECRET_ACCESS_KEY: 'local',
          AWS_EC2_METADATA_DISABLED: 'true',
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
          NODE_NO_WARNINGS: '1',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    // A slow reader: the pipe fills, and the CLI's writes queue up behind it.
    child.stdout.pause();
    const reading = setInterval(() => {
      child.stdout.resume();
      setTimeout(() => child.stdout.pause(), 5);
    }, 20);
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    clearInterval(reading);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const listed = stdout.split('\n').filter((line) => line.includes('POST /orders#'));
    expect(listed).toHaveLength(RECORDS);
  }, 60_000);
});
