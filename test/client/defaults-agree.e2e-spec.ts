import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';
import { Dynalite, startDynalite, uniqueTableName } from '../support/dynalite';
import { crashAfterCharge, DemoProcess, startDemoProcess } from '../support/demo-process';

interface Charge {
  chargeId: string;
  amount: number;
  key: string;
}

/**
 * The client's defaults against the module's, both untouched: the demo on its default lease (60 s) and clock-skew
 * margin, the retrying client on its default budget. The shop that owns the key is SIGKILLed mid-request; a client
 * on defaults, sent to the other shop, waits out the 409s until the dead owner's lease ends, and gets the answer of
 * the run that follows (the provider's charge, replayed by its key): never the 409.
 */
describe('the client on its defaults outlasts a crashed owner on the module’s defaults', () => {
  let store: Dynalite;
  const shops: DemoProcess[] = [];

  beforeAll(async () => {
    store = await startDynalite();
    const tables = { IDEMPOTENCY_TABLE: uniqueTableName('defaults'), ORDERS_TABLE: uniqueTableName('orders') };
    // The second shop is also the payment provider (its own POST /payments/charges); the first is slow after it
    // charged, the window the crash falls in.
    const steady = await startDemoProcess({ DYNAMODB_ENDPOINT: store.endpoint, ...tables });
    const crashing = await startDemoProcess({
      DYNAMODB_ENDPOINT: store.endpoint,
      ...tables,
      PAYMENTS_URL: steady.url,
      CHECKOUT_DELAY_MS: '120000',
    });
    shops.push(crashing, steady);
  }, 90_000);
  afterAll(async () => {
    await Promise.all(shops.map((shop) => shop.kill('SIGTERM')));
    await store.stop();
  });

  it('gets 201 after the lease, one charge, with no option set on either side', async () => {
    const [crashing, steady] = shops;
    const charges = async () => (await (await fetch(`${steady.url}/payments/charges`)).json()) as Charge[];
    const key = `defaults-${Date.now()}`;
    const body = { item: 'lamp', amount: 4200 };
    const before = (await charges()).length;
    await crashAfterCharge(crashing, charges, key, body);

    const started = performance.now();
    const answer = await createIdempotentClient({ baseUrl: steady.url }).request<{ chargeId: string }>(
      'POST',
      '/checkouts',
      { key, body },
    );
    expect(answer).toMatchObject({ status: 201, key, replayed: false });
    // The dead owner's lease held the key for most of a minute: many 409s waited out, within the default budget.
    expect(performance.now() - started).toBeGreaterThan(30_000);
    expect(answer.attempts).toBeGreaterThan(5);
    const made = (await charges()).slice(before);
    expect(made).toHaveLength(1);
    expect(answer.body.chargeId).toBe(made[0].chargeId);
  }, 150_000);
});
