import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { post, TestApp } from '../support/app';
import { PLATFORM_ENGINES } from '../support/engines';
import { Runs } from './payments.fixture';
import { PaymentsScenario, startPaymentsScenario } from './payments.scenario';

describe.each(PLATFORM_ENGINES)('concurrent duplicates on %s, %s, %s layout', (platform, engine, layout) => {
  let scenario: PaymentsScenario;
  let test: TestApp;

  beforeAll(async () => {
    scenario = await startPaymentsScenario(platform, { engine, layout });
    test = scenario.test;
  });
  afterAll(() => scenario.stop());

  it('runs the handler exactly once for 50 concurrent requests with one key', async () => {
    const key = `burst-${platform}`;
    const responses = await Promise.all(
      Array.from({ length: 50 }, () =>
        post(`${test.url}/payments`, { amount: 9, delayMs: 200 }, { 'Idempotency-Key': key }),
      ),
    );
    expect(test.get(Runs).of('create')).toBe(1);

    const winners = responses.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    const replays = responses.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === 'true');
    const inFlight = responses.filter((r) => r.status === 409);
    expect(winners).toHaveLength(1);
    expect(winners.length + replays.length + inFlight.length).toBe(50);
    expect(inFlight.length).toBeGreaterThan(0);
    for (const replay of replays) expect(replay.text).toBe(winners[0].text);
    for (const conflict of inFlight) {
      expect(conflict.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(conflict.text).type).toBe(ProblemType.inFlight);
      expect(Number(conflict.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(conflict.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    }

    const after = await post(`${test.url}/payments`, { amount: 9, delayMs: 200 }, { 'Idempotency-Key': key });
    expect(after.text).toBe(winners[0].text);
  });

  it('lets duplicates wait for the result on a route with waitMs', async () => {
    const key = `wait-${platform}`;
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => post(`${test.url}/payments/wait`, { delayMs: 300 }, { 'Idempotency-Key': key })),
    );
    expect(test.get(Runs).of('wait')).toBe(1);
    expect(responses.map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(new Set(responses.map((r) => r.text)).size).toBe(1);
    expect(responses.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(9);
  });
});
