import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';
import { Dynalite, startDynalite, uniqueTableName } from '../support/dynalite';
import { crashAfterCharge, DemoProcess, startDemoProcess } from '../support/demo-process';

interface Charge {
  chargeId: string;
  amount: number;
  key: string;
}

/**
 * Keys carried downstream, across processes: the demo's `POST /checkouts` charges a payment provider (another demo
 * process, its `POST /payments/charges` protected by the module) through the retrying client with
 * `{ name: 'charge' }`. The shop that charged is killed before it answers; the client's retry, to another shop,
 * waits out the dead owner's lease, runs the checkout again, and the provider gets the same key: one charge.
 */
describe('keys carried downstream, with the shop killed after the charge', () => {
  let store: Dynalite;
  let provider: DemoProcess;
  const shops: DemoProcess[] = [];

  beforeAll(async () => {
    store = await startDynalite();
    const tables = { IDEMPOTENCY_TABLE: uniqueTableName('downstream'), ORDERS_TABLE: uniqueTableName('orders') };
    provider = await startDemoProcess({ DYNAMODB_ENDPOINT: store.endpoint, ...tables });
    const shop = {
      DYNAMODB_ENDPOINT: store.endpoint,
      PAYMENTS_URL: provider.url,
      IDEMPOTENCY_PENDING_TTL_SECONDS: '2',
    };
    // The first shop is slow after the charge (the window a crash falls in); the second is not.
    shops.push(
      ...(await Promise.all([
        startDemoProcess({ ...shop, ...tables, CHECKOUT_DELAY_MS: '60000' }),
        startDemoProcess({ ...shop, ...tables }),
      ])),
    );
  }, 90_000);
  afterAll(async () => {
    await Promise.all([provider, ...shops].filter(Boolean).map((demo) => demo.kill('SIGTERM')));
    await store.stop();
  });

  const charges = async () => (await (await fetch(`${provider.url}/payments/charges`)).json()) as Charge[];

  it('the retry after the lease sends the provider the same key, and gets the first charge back: one charge', async () => {
    const [crashing, retrying] = shops;
    const key = `checkout-${Date.now()}`;
    const body = { item: 'book', amount: 1250 };
    const before = (await charges()).length;
    await crashAfterCharge(crashing, charges, key, body);

    const client = createIdempotentClient({ baseUrl: retrying.url, maxElapsedMs: 20_000 });
    const answer = await client.request<{ chargeId: string; charge: { replayed: boolean } }>('POST', '/checkouts', {
      key,
      body,
    });

    const made = (await charges()).slice(before);
    expect(made).toEqual([expect.objectContaining({ amount: 1250, key: expect.stringMatching(/^[0-9a-f]{64}$/) })]);
    expect(answer).toMatchObject({ status: 201, key, replayed: false });
    // The dead owner's lease held the key: the client waited out 409s (Retry-After), then the checkout ran again.
    expect(answer.attempts).toBeGreaterThan(1);
    expect(answer.body).toMatchObject({ chargeId: made[0].chargeId, charge: { replayed: true } });
    const again = await client.request('POST', '/checkouts', { key, body });
    expect(again).toMatchObject({ status: 201, replayed: true, body: answer.body, attempts: 1 });
    expect((await charges()).slice(before)).toHaveLength(1);
  }, 60_000);
});
