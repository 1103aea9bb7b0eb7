import { setTimeout as sleep } from 'node:timers/promises';
import { post, startApp, TestApp } from '../support/app';
import { PLATFORM_ENGINES } from '../support/engines';
import { Runs, paymentsModule } from './payments.fixture';
import { PaymentsScenario, startPaymentsScenario } from './payments.scenario';

/**
 * Two app instances on one table (dynalite, and DynamoDB Local when it runs), as two processes would be: each has its own replay cache and
 * single-flight, so what they agree on is decided by DynamoDB's conditional writes alone.
 */
describe.each(PLATFORM_ENGINES)('two instances on one table, on %s, %s, %s layout', (platform, engine, layout) => {
  let scenario: PaymentsScenario;
  let a: TestApp;
  let b: TestApp;
  let keys = 0;
  const newKey = () => `two-${platform}-${++keys}`;
  const runsOf = (handler: string) => a.get(Runs).of(handler) + b.get(Runs).of(handler);

  beforeAll(async () => {
    scenario = await startPaymentsScenario(platform, { engine, layout });
    a = scenario.test;
    b = await startApp(platform, paymentsModule(scenario.client, scenario.tableName, scenario.layout));
  });
  afterAll(async () => {
    await b.close();
    await scenario.stop();
  });

  it('runs the handler once for 20 concurrent requests split over both instances', async () => {
    const key = newKey();
    const before = runsOf('create');
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        post(`${(i % 2 ? a : b).url}/payments`, { amount: 8, delayMs: 200 }, { 'Idempotency-Key': key }),
      ),
    );
    expect(runsOf('create')).toBe(before + 1);
    const winners = responses.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    expect(winners).toHaveLength(1);
    expect(responses.every((r) => r.status === 201 || r.status === 409)).toBe(true);
    for (const app of [a, b]) {
      const replay = await post(`${app.url}/payments`, { amount: 8, delayMs: 200 }, { 'Idempotency-Key': key });
      expect(replay.text).toBe(winners[0].text);
    }
  });

  it('lets a duplicate with waitMs wait for an owner in the other instance, by polling DynamoDB', async () => {
    const key = newKey();
    const before = runsOf('wait');
    const owner = post(`${a.url}/payments/wait`, { delayMs: 600 }, { 'Idempotency-Key': key });
    await sleep(150);
    const waiter = await post(`${b.url}/payments/wait`, { delayMs: 600 }, { 'Idempotency-Key': key });
    const first = await owner;
    expect(waiter.status).toBe(201);
    expect(waiter.headers.get('idempotent-replayed')).toBe('true');
    expect(waiter.text).toBe(first.text);
    expect(runsOf('wait')).toBe(before + 1);
  });

  it('fences an orphan that finishes first: the successor that took over its lease is what replays', async () => {
    const key = newKey();
    const gate = `fence-${platform}`;
    // The handler answers { gate, run }: let the successor's runs count from 101, so the two answers differ.
    b.get(Runs).count.set(`parked:${gate}`, 100);
    const parked = (app: TestApp) => app.get(Runs).gates.get(`${gate}:${app === a ? 1 : 101}`);
    const until = async (condition: () => unknown) => {
      while (!condition()) await sleep(5);
    };

    const orphan = post(`${a.url}/payments/parked/${gate}`, {}, { 'Idempotency-Key': key });
    await until(() => parked(a));
    a.clock.advanceSeconds(7); // the route's 5 s lease and its 1.25 s clock-skew margin are over for both clocks
    b.clock.advanceSeconds(7);
    const successor = post(`${b.url}/payments/parked/${gate}`, {}, { 'Idempotency-Key': key });
    await until(() => parked(b));

    parked(a)!(); // the orphan completes while its successor is still running
    const orphanResponse = await orphan;
    parked(b)!();
    const successorResponse = await successor;

    expect(JSON.parse(orphanResponse.text)).toEqual({ gate, run: 1 }); // its caller still gets its own result
    expect(JSON.parse(successorResponse.text)).toEqual({ gate, run: 101 });
    const replayFromOrphan = await post(`${a.url}/payments/parked/${gate}`, {}, { 'Idempotency-Key': key });
    expect(replayFromOrphan.headers.get('idempotent-replayed')).toBe('true');
    expect(replayFromOrphan.text).toBe(successorResponse.text);
  });
});
