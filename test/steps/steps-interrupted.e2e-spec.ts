import { setTimeout as sleep } from 'node:timers/promises';
import { types } from 'node:util';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { DemoProcess, startDemoProcess } from '../support/demo-process';
import { localClient } from '../support/dynalite';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import {
  Charge,
  printed,
  providerSince,
  Purchase,
  Receipt,
  reconcileOnce,
  startWorker,
  tablesWithoutTtl,
} from './purchase-processes';

/**
 * A purchase of two steps (charge, then receipt) stopped after its first step, and resumed by another process, on
 * DynamoDB Local: by an error that is not final, or by a SIGKILL (with or without the reconciler's sweep before the
 * retry). Each case runs both ways in: the demo's `POST /purchases` (HTTP), and `IdempotencyService.execute` in a
 * worker process (purchase-worker.script.ts). The payment provider (another demo process) keeps the truth: one
 * charge, one receipt. Whether the step that was never reached counts the stopped run in its `attempt` is part of
 * each answer: not after an error (that run recorded every step it started), yes after a death (for all the store
 * knows, it started the receipt).
 */
describeOnDynamoDbLocal('steps resumed after an interruption, across processes on DynamoDB Local', () => {
  let endpoint = '';
  let provider: DemoProcess;
  const stops: (() => Promise<void>)[] = [];
  let tables: Record<string, string> = {};
  const lease = { IDEMPOTENCY_PENDING_TTL_SECONDS: '2' }; // the worker's lease is 2 s too

  /** What a test needs of one way in: a process that buys (with a fault), and the retry through another process. */
  interface WayIn {
    operation: string;
    start(
      fault?: 'pause' | 'fail',
    ): Promise<{ pid: number; buy(key: string): Promise<unknown>; kill(): Promise<void> }>;
    retry(key: string): Promise<Purchase>;
  }

  /** A shop: the demo, on the shared tables, with a 2 s lease, paying the provider. */
  const shop = async (fault?: 'pause' | 'fail') => {
    const demo = await startDemoProcess({
      DYNAMODB_ENDPOINT: endpoint,
      PAYMENTS_URL: provider.url,
      ...tables,
      ...lease,
      ...(fault === 'pause' ? { PURCHASE_PAUSE: 'after-charge:60000' } : {}),
      ...(fault === 'fail' ? { PURCHASE_FAIL: 'after-charge' } : {}),
    });
    stops.push(() => demo.kill());
    return demo;
  };

  const http: WayIn = {
    operation: 'POST /purchases',
    start: async (fault) => {
      const demo = await shop(fault);
      const buy = async (key: string) => {
        const answer = fetch(`${demo.url}/purchases`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ item: 'book', amount: 1250 }),
        }).then(
          async (response) => ({ status: response.status, body: await response.json() }),
          () => 'connection lost',
        );
        if (fault !== 'pause') return answer;
        await printed(demo, 'purchase paused after-charge');
        return { answer };
      };
      return { pid: demo.child.pid!, buy, kill: () => demo.kill() };
    },
    retry: async (key) => {
      const demo = await shop();
      const answer = await createIdempotentClient({ baseUrl: demo.url, maxElapsedMs: 20_000 }).request<Purchase>(
        'POST',
        '/purchases',
        { key, body: { item: 'book', amount: 1250 } },
      );
      expect(answer.status).toBe(201);
      return answer.body;
    },
  };

  const execute: WayIn = {
    operation: 'fn purchase',
    start: async (fault) => {
      const worker = await startWorker({
        DYNAMODB_ENDPOINT: endpoint,
        IDEMPOTENCY_TABLE: tables.IDEMPOTENCY_TABLE,
        PAYMENTS_URL: provider.url,
        ...(fault ? { PURCHASE_FAULT: `${fault === 'pause' ? 'pause' : 'fail'}-after-charge` } : {}),
      });
      stops.push(() => worker.kill());
      const buy = async (key: string) => {
        const answer = worker.buy(key);
        if (fault !== 'pause') return answer;
        await printed(worker, 'purchase paused after-charge');
        return { answer };
      };
      return { pid: worker.child.pid!, buy, kill: () => worker.kill() };
    },
    retry: async (key) => {
      const worker = await startWorker({
        DYNAMODB_ENDPOINT: endpoint,
        IDEMPOTENCY_TABLE: tables.IDEMPOTENCY_TABLE,
        PAYMENTS_URL: provider.url,
      });
      stops.push(() => worker.kill());
      const answer = await worker.buy(key);
      if (typeof answer !== 'object' || !('value' in answer)) throw new Error(`the retry failed: ${String(answer)}`);
      const { chargedAt } = answer.value;
      expect(types.isDate(chargedAt)).toBe(true); // recorded as a Date by the first process, and one again here
      return { ...answer.value, chargedAt: (chargedAt as Date).toISOString() } as unknown as Purchase;
    },
  };

  beforeAll(async () => {
    endpoint = (await startStore('dynamodb-local')).endpoint;
    tables = await tablesWithoutTtl(endpoint);
    provider = await startDemoProcess({ DYNAMODB_ENDPOINT: endpoint, ...tables });
    stops.push(() => provider.kill());
  }, 90_000);
  afterAll(async () => {
    await Promise.all(stops.map((stop) => stop()));
  });

  const record = async (way: WayIn, key: string) => {
    const { Item } = await localClient(endpoint).send(
      new GetItemCommand({
        TableName: tables.IDEMPOTENCY_TABLE,
        Key: { pk: { S: recordKey(way.operation, undefined, key) } },
        ConsistentRead: true,
      }),
    );
    return Item && unmarshall(Item);
  };
  let keys = 0;
  const newKey = () => `interrupted-${Date.now()}-${++keys}`;

  /** The retry's answer resumed the stopped run: one charge (that run's) and one receipt at the provider. */
  async function resumed(
    since: () => Promise<{ charges: Charge[]; receipts: Receipt[] }>,
    answer: Purchase,
    by: number,
    ranHere: string[],
  ) {
    const { charges, receipts } = await since();
    expect(charges).toHaveLength(1);
    expect(receipts).toHaveLength(1);
    expect(answer).toMatchObject({
      chargeId: charges[0].chargeId,
      chargedAt: charges[0].chargedAt,
      chargedBy: by,
      receiptId: receipts[0].receiptId,
      ranHere,
    });
  }

  describe.each([
    ['HTTP', http],
    ['execute()', execute],
  ])('%s', (_name, way) => {
    it('an error that is not final after step 1: the retry resumes after the recorded charge', async () => {
      const since = await providerSince(provider);
      const failing = await way.start('fail');
      const key = newKey();
      expect(await failing.buy(key)).toMatchObject(
        way === http ? { status: 503 } : { error: 'Error: a simulated outage after the charge' },
      );
      const released = await record(way, key);
      expect(released).toMatchObject({ status: 'FAILED', runs: 0 }); // that run started no step it did not record
      expect(Object.keys(released?.steps ?? {})).toEqual(['charge']);

      await resumed(since, await way.retry(key), failing.pid, ['receipt#1']);
    }, 60_000);

    it('killed after step 1, then swept by the reconciler: the sweep keeps the charge, the retry resumes', async () => {
      const since = await providerSince(provider);
      const crashing = await way.start('pause');
      const key = newKey();
      await crashing.buy(key);
      await crashing.kill();
      const stuck = await record(way, key);
      expect(stuck).toMatchObject({ status: 'PENDING', runs: 1 });
      // The sweep releases a lease that ended, by more than the clock-skew margin.
      while (Date.now() / 1000 < Number(stuck?.expires_at) + 3) await sleep(100);
      expect(await reconcileOnce(endpoint, tables.IDEMPOTENCY_TABLE)).toMatchObject({ released: 1 });
      const swept = await record(way, key);
      expect(swept).toMatchObject({ status: 'FAILED', runs: 1 });
      expect(Object.keys(swept?.steps ?? {})).toEqual(['charge']);

      await resumed(since, await way.retry(key), crashing.pid, ['receipt#2']);
    }, 60_000);
  });

  // Through HTTP: steps-crash.e2e-spec.ts.
  it('execute(), killed after step 1: the retry waits out the lease and resumes after the recorded charge', async () => {
    const since = await providerSince(provider);
    const crashing = await execute.start('pause');
    const key = newKey();
    const { answer: first } = (await crashing.buy(key)) as { answer: Promise<unknown> };
    await crashing.kill();
    expect(await first).toBe('connection lost');

    await resumed(since, await execute.retry(key), crashing.pid, ['receipt#2']);
  }, 60_000);
});
