import { writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { Controller, Headers, Post } from '@nestjs/common';
import {
  DynamoDbIdempotencyRepository,
  Idempotent,
  IdempotencyModule,
  TableLayoutOptions,
} from 'nestjs-dynamodb-idempotency';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { fingerprintRequest } from '../../libs/idempotency/src/keys/fingerprint';
import { recordKey, scopePartition } from '../../libs/idempotency/src/keys/record-key';
import { TableLayout } from '../../libs/idempotency/src/dynamodb/table-layout';
import { post, startApp, TestApp } from '../support/app';
import { buildLibrary, runCli } from '../support/built-cli';
import { localClient, uniqueTableName } from '../support/dynalite';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { FaultProxy, startFaultProxy } from '../support/fault-proxy';
import { LAYOUTS } from '../support/layouts';
import { RunsByKey } from '../support/runs-by-key';
import { createIdempotencyTable } from '../support/table';

/**
 * The operator's commands for one key, as an operator runs them: the built CLI as a child process against DynamoDB
 * Local, on the default layout and on a single-table one (its layout given by --config). The app runs in real time
 * (the CLI reads the wall clock).
 */

@Controller('orders')
class OrdersController {
  constructor(private readonly runs: RunsByKey) {}

  @Post()
  @Idempotent({ scope: (_context, request) => request.headers['x-tenant'] })
  create(@Headers('idempotency-key') key: string) {
    this.runs.count(key);
    return { order: key, run: RunsByKey.of(key) };
  }

  /** A handler that runs for a while on a 3 s lease: its owner renews every second meanwhile. */
  @Post('slow')
  @Idempotent({ scope: (_context, request) => request.headers['x-tenant'], pendingTtlSeconds: 3 })
  async slow(@Headers('idempotency-key') key: string) {
    await new Promise((resolve) => setTimeout(resolve, 4000));
    return { order: key };
  }
}

const cli = (args: string[]) => runCli(args);

beforeAll(buildLibrary, 120_000);

describeOnDynamoDbLocal.each(Object.keys(LAYOUTS) as (keyof typeof LAYOUTS)[])(
  'the admin CLI on DynamoDB Local, %s layout',
  (layoutName) => {
    const layout: TableLayoutOptions = LAYOUTS[layoutName];
    let client: DynamoDBClient;
    let proxy: FaultProxy;
    let tableName: string;
    let app: TestApp;
    let flags: string[];
    let keys = 0;
    const newKey = () => `cli-${layoutName}-${++keys}`;
    const tenant = 'acme';
    const location = (key: string) => ({
      key: recordKey('POST /orders', tenant, key),
      partition: layout.keySchema?.sortKey ? scopePartition(layout.keyPrefix ?? '', tenant) : undefined,
    });
    /** A repository on the wall clock, or `agoSeconds` behind it: a crashed owner's claim left PENDING. */
    const stuck = async (key: string, agoSeconds = 0, fingerprint = 'fp') => {
      const clock = new ManualClock(Date.now() - agoSeconds * 1000);
      const repository = new DynamoDbIdempotencyRepository({ client, tableName, clock, ...layout });
      const claim = await repository.claim({ ...location(key), fingerprint, leaseSeconds: 7200, holder: 'host-b:99' });
      if (!claim.claimed) throw new Error('not claimed');
      return claim.claimToken;
    };
    const select = (key: string) => ['--route', 'POST /orders', '--key', key, '--scope', tenant, ...flags];

    beforeAll(async () => {
      const { endpoint } = await startStore('dynamodb-local');
      client = localClient(endpoint);
      proxy = await startFaultProxy(endpoint);
      tableName = uniqueTableName('cli');
      await createIdempotencyTable(client, tableName, layout);
      const config = join(tmpdir(), `${tableName}.json`);
      writeFileSync(config, JSON.stringify({ tableName, ...layout }));
      flags = ['--config', config, '--endpoint', proxy.endpoint, '--region', 'us-east-1'];
      app = await startApp(
        'express',
        {
          imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false }, ...layout })],
          controllers: [OrdersController],
          providers: [RunsByKey],
        },
        { realTime: true },
      );
    }, 60_000);
    afterAll(async () => {
      await app.close();
      await proxy.stop();
    });

    it('locates a key exactly as the module derives it', async () => {
      const key = newKey();
      const { code, stdout } = await cli(['keys:locate', ...select(key), '--json']);
      expect(code).toBe(0);
      const located = JSON.parse(stdout);
      expect(located).toMatchObject({
        key: location(key).key,
        itemKey: new TableLayout(layout).itemKey(location(key).key, location(key).partition),
      });
      expect(located.partition).toBe(location(key).partition);
    });

    it('inspects a stuck PENDING key, releases it, and the next request runs once', async () => {
      const key = newKey();
      const fingerprint = fingerprintRequest({ method: 'POST', route: '/orders', params: {}, query: {}, body: {} });
      await stuck(key, 3000, fingerprint); // its 2-hour lease runs on: no renewal for 50 minutes
      const blocked = await post(`${app.url}/orders`, {}, { 'Idempotency-Key': key, 'x-tenant': tenant });
      expect(blocked.status).toBe(409);

      const inspected = await cli(['keys:inspect', ...select(key)]);
      expect(inspected.code).toBe(0);
      expect(inspected.stdout).toMatch(/status: PENDING/);
      expect(inspected.stdout).toMatch(/pending since: \d{4}-\d\d-\d\dT/);
      expect(inspected.stdout).toMatch(/expires at: .* \(in \d+ s\)/);
      // Which process holds it, and that it stopped renewing (a live owner renews every third of its lease).
      expect(inspected.stdout).toMatch(/holder: host-b:99\n/);
      expect(inspected.stdout).toMatch(/last renewed: \d{4}-\d\d-\d\dT/);
      expect(inspected.stdout).toMatch(
        /owner: the owner looks paused or dead: claimed 30\d\d s ago by host-b:99, not renewed since, though a live owner renews about every 2400 s/,
      );

      const released = await cli(['keys:release', ...select(key)]);
      expect(released.code).toBe(0);
      expect(released.stdout).toMatch(/its completion will be refused \(lease lost\)/);
      expect((await cli(['keys:inspect', ...select(key)])).code).toBe(1);

      const first = await post(`${app.url}/orders`, {}, { 'Idempotency-Key': key, 'x-tenant': tenant });
      expect(first.status).toBe(201);
      expect(
        (await post(`${app.url}/orders`, {}, { 'Idempotency-Key': key, 'x-tenant': tenant })).headers.get(
          'idempotent-replayed',
        ),
      ).toBe('true');
      expect(RunsByKey.of(key)).toBe(1);
    });

    it('tells a live owner (renewing as it runs) from a dead one, and names the process holding the key', async () => {
      const key = newKey();
      const running = post(`${app.url}/orders/slow`, {}, { 'Idempotency-Key': key, 'x-tenant': tenant });
      await new Promise((resolve) => setTimeout(resolve, 2500)); // two renewals in
      const select = ['--route', 'POST /orders/slow', '--key', key, '--scope', tenant, ...flags];
      const alive = await cli(['keys:inspect', ...select, '--json']);
      const report = JSON.parse(alive.stdout);
      expect(report).toMatchObject({ status: 'PENDING', holder: `${hostname()}:${process.pid}` });
      expect(Date.parse(report.renewedAt)).toBeGreaterThan(Date.parse(report.pendingSince));
      expect(report.owner).toMatch(
        /^the owner looks alive: renewed [0-2] s ago by .*, a live owner renews about every 1 s.*; a killed owner looks alive too until a renewal is overdue: to be sure, check that \S+:\d+ \(host:pid, or lambda:request id\) still runs$/,
      );
      expect((await running).status).toBe(201);
      // Its lease ended long ago and nothing renewed it: a dead owner.
      const dead = newKey();
      await stuck(dead, 7300, 'fp');
      const gone = await cli([
        'keys:inspect',
        ...['--route', 'POST /orders', '--key', dead, '--scope', tenant, ...flags],
      ]);
      expect(gone.stdout).toMatch(
        /owner: the owner looks dead: its lease ended 1\d\d s ago \(claimed 73\d\d s ago by host-b:99, not renewed since\); the next request takes the key over/,
      );
    }, 30_000);

    it('refuses to release a COMPLETED key without --force, and purges it: the next request runs again', async () => {
      const key = newKey();
      await post(`${app.url}/orders`, {}, { 'Idempotency-Key': key, 'x-tenant': tenant });
      const refused = await cli(['keys:release', ...select(key)]);
      expect(refused.code).toBe(1);
      expect(refused.stdout).toMatch(/COMPLETED/);
      const inspected = JSON.parse((await cli(['keys:inspect', ...select(key), '--json', '--show-body'])).stdout);
      expect(inspected).toMatchObject({
        status: 'COMPLETED',
        storedStatus: 201,
        sealed: false,
        body: { order: key, run: 1 },
      });
      expect(inspected.storedBytes).toBeGreaterThan(0);

      const unasked = await cli(['keys:purge', ...select(key)]);
      expect(unasked.code).toBe(2); // not on a terminal: it cannot ask
      expect(unasked.stderr).toMatch(/needs --yes/);
      const purged = await cli(['keys:purge', ...select(key), '--yes']);
      expect(purged.code).toBe(0);
      const again = await post(`${app.url}/orders`, {}, { 'Idempotency-Key': key, 'x-tenant': tenant });
      expect(JSON.parse(again.text)).toEqual({ order: key, run: 2 });
    });

    it('does nothing when the claim token changed between its read and its delete', async () => {
      const key = newKey();
      await stuck(key);
      const { key: itemRecordKey, partition } = location(key);
      const names = new TableLayout(layout).names;
      proxy.before = {
        operation: 'DeleteItem',
        run: async () => {
          // Another owner claims the key between the CLI's read and its delete.
          await client.send(
            new UpdateItemCommand({
              TableName: tableName,
              Key: new TableLayout(layout).itemKey(itemRecordKey, partition),
              UpdateExpression: 'SET #token = :other',
              ExpressionAttributeNames: { '#token': names.claim_token },
              ExpressionAttributeValues: { ':other': { S: 'another-owner' } },
            }),
          );
        },
      };
      const released = await cli(['keys:release', ...select(key)]);
      expect(released.code).toBe(1);
      expect(released.stdout).toMatch(/changed since it was read/);
      expect(JSON.parse((await cli(['keys:inspect', ...select(key), '--json'])).stdout)).toMatchObject({
        status: 'PENDING',
        claimToken: 'another-owner',
      });
    });

    it('lists records by status and age, as lines or JSON', async () => {
      const old = newKey();
      const recent = newKey();
      await stuck(old, 3600);
      await stuck(recent, 0);
      const listed = await cli(['keys:list', '--status', 'PENDING', '--older-than', '30m', '--json', ...flags]);
      expect(listed.code).toBe(0);
      const keysListed = (JSON.parse(listed.stdout) as { key: string }[]).map((record) => record.key);
      expect(keysListed).toContain(location(old).key);
      expect(keysListed).not.toContain(location(recent).key);
      const lines = await cli(['keys:list', '--status', 'PENDING', ...flags]);
      expect(lines.stdout).toContain(location(recent).key);
      const none = await cli(['keys:list', '--status', 'FAILED', '--older-than', '30d', ...flags]);
      expect(none.code).toBe(1);
      if (layout.keySchema?.sortKey) {
        const byScope = await cli(['keys:list', '--scope', tenant, '--json', ...flags]);
        expect(
          (JSON.parse(byScope.stdout) as { partition: string }[]).every(
            (record) => record.partition === location(old).partition,
          ),
        ).toBe(true);
      } else {
        const byScope = await cli(['keys:list', '--scope', tenant, ...flags]);
        expect(byScope.code).toBe(2); // the record key hashes scope and key together: no listing by scope here
      }
    });

    it('answers --help with exit 0, a missing selector with exit 2', async () => {
      const help = await cli(['keys:inspect', '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(/Usage: nestjs-dynamodb-idempotency keys:inspect/);
      const usage = await cli(['keys:release', ...flags]);
      expect(usage.code).toBe(2);
      expect((await cli(['no-such-command'])).code).toBe(2);
    });
  },
);
