import fc from 'fast-check';
import { post } from '../support/app';
import { PaymentsScenario, startPaymentsScenario } from '../http/payments.scenario';

/** Two callers using the same key never see each other's responses (the fixture scopes keys by `x-tenant`). */
describe('key scoping', () => {
  let scenario: PaymentsScenario;
  beforeAll(async () => {
    scenario = await startPaymentsScenario('express');
  });
  afterAll(() => scenario.stop());

  it('gives every caller its own result for a shared key, and replays only its own', async () => {
    const tenant = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(tenant, { minLength: 2, maxLength: 4 }),
        fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/),
        fc.integer({ min: 1, max: 1000 }),
        async (tenants, key, amount) => {
          const sharedKey = `${key}-${++run}`;
          const call = (who: string) =>
            post(`${scenario.test.url}/payments`, { amount }, { 'Idempotency-Key': sharedKey, 'x-tenant': who });
          const firsts = await Promise.all(tenants.map(call));
          const ids = firsts.map((response) => JSON.parse(response.text).id);
          expect(
            firsts.every((response) => response.status === 201 && response.headers.get('idempotent-replayed') === null),
          ).toBe(true);
          expect(new Set(ids).size).toBe(tenants.length);
          const replays = await Promise.all(tenants.map(call));
          replays.forEach((replay, i) => {
            expect(replay.headers.get('idempotent-replayed')).toBe('true');
            expect(replay.text).toBe(firsts[i].text);
          });
        },
      ),
      { numRuns: 40 },
    );
  });
});
