import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';
import { DemoProcess, startDemoProcess } from '../support/demo-process';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { printed, providerSince, Purchase, tablesWithoutTtl } from './purchase-processes';

/**
 * Recovery points across real processes, on DynamoDB Local: the demo's `POST /purchases` charges a payment provider
 * (another demo process) in step `charge`, then sends a receipt in step `receipt`, each keyed by its step's key. A
 * shop is killed (SIGKILL) or frozen (SIGSTOP) inside the purchase; the client's retry, to another shop, waits out the
 * lease (2 s) and resumes. The provider's own lists say what happened: each charge and receipt once.
 */
describeOnDynamoDbLocal('steps across processes on DynamoDB Local', () => {
  let endpoint = '';
  let provider: DemoProcess;
  let resuming: DemoProcess;
  const started: DemoProcess[] = [];
  let tables: Record<string, string> = {};
  const shop = () => ({
    DYNAMODB_ENDPOINT: endpoint,
    PAYMENTS_URL: provider.url,
    IDEMPOTENCY_PENDING_TTL_SECONDS: '2',
    ...tables,
  });
  const start = async (env: Record<string, string>) => {
    const demo = await startDemoProcess(env);
    started.push(demo);
    return demo;
  };

  beforeAll(async () => {
    endpoint = (await startStore('dynamodb-local')).endpoint;
    tables = await tablesWithoutTtl(endpoint);
    provider = await start({ DYNAMODB_ENDPOINT: endpoint, ...tables });
    resuming = await start(shop());
  }, 90_000);
  afterAll(async () => {
    await Promise.all(started.map((demo) => demo.kill('SIGKILL')));
  });

  const purchase = (demo: DemoProcess, key: string) =>
    fetch(`${demo.url}/purchases`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ item: 'book', amount: 1250 }),
    }).then(
      async (response) => ({ status: response.status, body: await response.json() }),
      () => 'connection lost' as const, // with the process
    );
  const retried = (key: string) =>
    createIdempotentClient({ baseUrl: resuming.url, maxElapsedMs: 20_000 }).request<Purchase>('POST', '/purchases', {
      key,
      body: { item: 'book', amount: 1250 },
    });
  const pausedIn = (demo: DemoProcess, at: string) => printed(demo, `purchase paused ${at}`);
  const newKey = (name: string) => `${name}-${Date.now()}`;

  it('killed after step 1: the retry resumes, gets the charge made by the dead process as a Date, charges nothing again', async () => {
    const crashing = await start({ ...shop(), PURCHASE_PAUSE: 'after-charge:60000' });
    const key = newKey('after-charge');
    const since = await providerSince(provider);
    const first = purchase(crashing, key);
    await pausedIn(crashing, 'after-charge');
    await crashing.kill('SIGKILL');
    expect(await first).toBe('connection lost');

    const answer = await retried(key);
    const { charges, receipts } = await since();
    expect(charges).toHaveLength(1);
    expect(receipts).toHaveLength(1);
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({
      chargeId: charges[0].chargeId,
      chargedAt: charges[0].chargedAt, // toISOString() of the recorded Date: a string would have thrown (500)
      chargedBy: crashing.child.pid,
      receiptId: receipts[0].receiptId,
      // The dead run may have started the receipt for all the store knows (it died after its last write): a crash
      // between steps counts as a possible start, so `attempt` is never less than the truth (docs/recovery-points.md).
      ranHere: ['receipt#2'],
    });
    expect(receipts[0]).toMatchObject({ chargeId: charges[0].chargeId, key: expect.stringMatching(/^[0-9a-f]{64}$/) });
  }, 60_000);

  it('killed inside step 2 after its call: the retry runs step 2 again with the same key, step 1 not again', async () => {
    const crashing = await start({ ...shop(), PURCHASE_PAUSE: 'in-receipt:60000' });
    const key = newKey('in-receipt');
    const since = await providerSince(provider);
    const first = purchase(crashing, key);
    await pausedIn(crashing, 'in-receipt');
    await crashing.kill('SIGKILL');
    expect(await first).toBe('connection lost');
    expect((await since()).receipts).toHaveLength(1); // its effect happened

    const answer = await retried(key);
    const { charges, receipts } = await since();
    expect(charges).toHaveLength(1);
    expect(receipts).toHaveLength(1); // the same key: the provider answered with the first receipt
    expect(answer.body).toMatchObject({ chargedBy: crashing.child.pid, receiptId: receipts[0].receiptId });
    expect(answer.body.ranHere).toEqual(['receipt#2']);
  }, 60_000);

  it('frozen after step 1 while another process completes the purchase: thawed, it runs no step and changes nothing', async () => {
    const freezing = await start({ ...shop(), PURCHASE_PAUSE: 'after-charge:3000' });
    const key = newKey('frozen');
    const since = await providerSince(provider);
    const first = purchase(freezing, key);
    await pausedIn(freezing, 'after-charge');
    freezing.child.kill('SIGSTOP');
    try {
      const answer = await retried(key);
      expect(answer).toMatchObject({ status: 201, body: { ranHere: ['receipt#2'] } }); // the frozen run counts, as a crash does
      freezing.child.kill('SIGCONT');
      const thawed = await first;
      expect(thawed).toMatchObject({ status: 409 }); // its lease was lost: it stops, and nothing of it is stored
      expect((await since()).receipts).toHaveLength(1);
      expect(freezing.output()).toMatch(/step refused: a step does not start once its caller may have lost the lease/);
      const replay = await retried(key);
      expect(replay).toMatchObject({ status: 201, replayed: true, body: answer.body });
    } finally {
      freezing.child.kill('SIGCONT');
    }
  }, 60_000);
});
