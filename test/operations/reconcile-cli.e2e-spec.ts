import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { writeFileSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { buildLibrary, runCli } from '../support/built-cli';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { LAYOUTS } from '../support/layouts';
import { createIdempotencyTable } from '../support/table';
import { metricValue } from '../support/telemetry';

/**
 * `reconcile` as a scheduled job runs it: the built CLI as a child process, on a single-table layout (given by
 * --config) over dynalite, in real time (the CLI reads the wall clock).
 */
const layout = LAYOUTS['single-table'];

const cli = (args: string[]) => runCli(args, { NODE_NO_WARNINGS: '1' });

let dynamo: Dynalite;
let client: DynamoDBClient;
let proxy: FaultProxy;
beforeAll(async () => {
  buildLibrary();
  dynamo = await startDynalite();
  client = localClient(dynamo.endpoint);
  proxy = await startFaultProxy(dynamo.endpoint);
}, 120_000);
afterAll(async () => {
  await proxy.stop();
  await dynamo.stop();
});

/** A record key as the module writes them (a sweep touches only those). */
const k = (name: string) => recordKey('POST /reconciled', 'tenant', name);

/** A table of its own, its --config, and a repository writing to it `agoSeconds` behind the wall clock. */
async function table() {
  const tableName = uniqueTableName('reconcile');
  await createIdempotencyTable(client, tableName, layout);
  const config = join(tmpdir(), `${tableName}.json`);
  writeFileSync(config, JSON.stringify({ tableName, ...layout }));
  const claim = async (key: string, agoSeconds: number, leaseSeconds: number) => {
    const clock = new ManualClock(Date.now() - agoSeconds * 1000);
    const repository = new DynamoDbIdempotencyRepository({ client, tableName, clock, ...layout });
    const claimed = await repository.claim({
      key: k(key),
      partition: 'IDEMPOTENCY#tenant',
      fingerprint: 'fp',
      leaseSeconds,
    });
    if (!claimed.claimed) throw new Error(`${key} not claimed`);
  };
  const status = async (key: string) =>
    (
      await new DynamoDbIdempotencyRepository({ client, tableName, ...layout }).get({
        key: k(key),
        partition: 'IDEMPOTENCY#tenant',
      })
    )?.status;
  return { tableName, config, claim, status };
}

it('releases a crashed owner’s key, leaves a live one, and prints the summary as JSON', async () => {
  const { config, claim, status } = await table();
  await claim('crashed', 600, 60);
  await claim('live', 0, 60);
  const { code, stdout, stderr } = await cli([
    'reconcile',
    '--config',
    config,
    '--endpoint',
    dynamo.endpoint,
    '--json',
  ]);
  expect(code).toBe(0);
  // The table (table:create's) has the index of keys in flight: the TTL canary reads its 2 items (a table that ends
  // within its first pages is counted whole), the index the stuck one.
  expect(JSON.parse(stdout)).toMatchObject({
    scanned: 3,
    stuckPending: 1,
    released: 1,
    unreleased: 0,
    ttlStale: 1,
    ttlSampled: 2,
    ttlEstimated: false,
    indexed: true,
  });
  expect(stderr).toMatch(/"msg":"stuck PENDING item: lease passed without completion"/);
  expect(await status('crashed')).toBe('FAILED');
  expect(await status('live')).toBe('PENDING');
});

it('exits 3 when a stuck key could not be released, and 1 when the sweep itself fails', async () => {
  const { config, claim, status } = await table();
  await claim('crashed', 600, 60);
  proxy.failNext = { operation: 'UpdateItem', count: 1, type: 'AccessDeniedException' };
  const refused = await cli(['reconcile', '--config', config, '--endpoint', proxy.endpoint]);
  expect(refused.code).toBe(3);
  expect(refused.stdout).toMatch(/stuck PENDING: 1 \(released 0, could not release 1\)/);
  expect(await status('crashed')).toBe('PENDING');

  const missing = await cli(['reconcile', '--table', 'no_such_table', '--endpoint', dynamo.endpoint]);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toMatch(/the sweep of no_such_table .* failed: .*\(ResourceNotFoundException\)/);
});

describe('--pushgateway', () => {
  let gateway: Server;
  let pushes: { method?: string; url?: string; body: string }[];
  beforeAll(async () => {
    pushes = [];
    gateway = createServer((req, res) => {
      let body = '';
      req
        .on('data', (chunk) => (body += chunk))
        .on('end', () => {
          pushes.push({ method: req.method, url: req.url, body });
          res.writeHead(200).end();
        });
    });
    await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
  });
  afterAll(() => new Promise<void>((resolve) => gateway.close(() => resolve())));

  it('pushes the sweep’s gauges, grouped by job and table, for the alerts to watch', async () => {
    const { tableName, config, claim } = await table();
    await claim('crashed', 600, 60);
    const url = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
    const startedAt = Math.floor(Date.now() / 1000);
    const { code } = await cli([
      'reconcile',
      '--config',
      config,
      '--endpoint',
      dynamo.endpoint,
      '--pushgateway',
      url,
      '--interval',
      '2m',
    ]);
    expect(code).toBe(0);
    expect(pushes).toHaveLength(1);
    const [push] = pushes;
    expect(push).toMatchObject({ method: 'PUT', url: `/metrics/job/idempotency_reconciler/table/${tableName}` });
    expect(push.body).toMatch(/^# TYPE dedup_stuck_pending_total gauge$/m);
    expect(metricValue(push.body, 'dedup_stuck_pending_total')).toBe(1);
    expect(metricValue(push.body, 'dynamo_ttl_stale_items_total')).toBe(1);
    expect(metricValue(push.body, 'idempotency_reconciler_interval_seconds')).toBe(120);
    const last = metricValue(push.body, 'idempotency_reconciler_last_success_timestamp_seconds');
    expect(last).toBeGreaterThanOrEqual(startedAt);
    expect(last).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
  });
});
