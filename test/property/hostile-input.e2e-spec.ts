import fc from 'fast-check';
import { PLATFORMS, post } from '../support/app';
import { rawPost } from '../support/raw-http';
import { scanTable } from '../support/table';
import { Runs } from '../http/payments.fixture';
import { PaymentsScenario, startPaymentsScenario } from '../http/payments.scenario';

/**
 * Hostile input to the HTTP layer. Whatever arrives, the answer is a 4xx or a normal result: never a 5xx, never a key
 * left PENDING, never a second execution for one key.
 */
describe.each(PLATFORMS)('hostile input on %s', (platform) => {
  let scenario: PaymentsScenario;
  beforeAll(async () => {
    scenario = await startPaymentsScenario(platform);
  });
  afterAll(() => scenario.stop());
  const url = () => scenario.test.url;
  const json: Array<[string, string]> = [['Content-Type', 'application/json']];

  it('random key bytes (unicode, control bytes, quotes, commas): 4xx or one execution then replays', async () => {
    const keyBytes = fc.oneof(
      fc.uint8Array({ minLength: 0, maxLength: 40 }).map((bytes) => Buffer.from(bytes.filter((b) => b !== 10 && b !== 13))),
      fc.string({ unit: 'grapheme', maxLength: 30 }).map((text) => Buffer.from(text, 'utf8')),
      fc.string({ unit: 'binary-ascii', maxLength: 300 }).map((text) => Buffer.from(text.replace(/[\r\n]/g, ''), 'latin1')),
    );
    await fc.assert(
      fc.asyncProperty(keyBytes, fc.integer({ min: 1, max: 1_000_000 }), async (key, amount) => {
        const body = JSON.stringify({ amount });
        const headers: Array<[string, Buffer | string]> = [...json, ['Idempotency-Key', key]];
        const first = await rawPost(url(), '/payments', headers, body);
        const second = await rawPost(url(), '/payments', headers, body);
        expect(first.status).toBeLessThan(500);
        expect(second.status).toBeLessThan(500);
        if (first.status === 201) {
          expect(second.status).toBe(201);
          expect(second.headers.toLowerCase()).toContain('idempotent-replayed: true');
        } else {
          expect(second.status).toBe(first.status);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('oversized keys and repeated headers: 4xx', async () => {
    const body = '{"amount":1}';
    const tenKb = await rawPost(url(), '/payments', [...json, ['Idempotency-Key', 'k'.repeat(10 * 1024)]], body);
    const huge = await rawPost(url(), '/payments', [...json, ['Idempotency-Key', 'k'.repeat(20 * 1024)]], body);
    const repeated = await rawPost(url(), '/payments', [...json, ['Idempotency-Key', 'a'], ['Idempotency-Key', 'b']], body);
    expect(tenKb.status).toBe(400);
    expect(huge.status).toBe(431); // Node's own header size limit, before the app
    expect(repeated.status).toBe(400);
  });

  it.each([
    ['nested 10,000 levels deep', `{"amount":1,"nested":${'['.repeat(10_000)}${']'.repeat(10_000)}}`, 'application/json'],
    ['nested 65 levels deep', `{"amount":1,"nested":${'['.repeat(65)}${']'.repeat(65)}}`, 'application/json'],
    ['invalid JSON', '{"amount":', 'application/json'],
    ['2 MB of JSON', JSON.stringify({ amount: 1, pad: 'x'.repeat(2 * 1024 * 1024) }), 'application/json'],
    ['text/plain', 'amount=1', 'text/plain'],
    ['a form', 'amount=1', 'application/x-www-form-urlencoded'],
    ['binary', '\u0000\u0001\u0002', 'application/octet-stream'],
  ])('a body that is %s: 4xx, and the key is usable afterwards', async (_, body, type) => {
    const key = `hostile-${platform}-${type}-${body.length}`;
    const response = await rawPost(url(), '/payments', [['Content-Type', type], ['Idempotency-Key', key]], body);
    expect(response.status).toBeGreaterThanOrEqual(400);
    expect(response.status).toBeLessThan(500);
    const valid = await post(`${url()}/payments`, { amount: 5 }, { 'Idempotency-Key': key });
    expect(valid.status).toBe(201);
  });

  it('leaves no key PENDING and never ran a key twice', async () => {
    const items = await scanTable(scenario.client, scenario.tableName);
    expect(items.filter(({ item }) => item.status === 'PENDING')).toEqual([]);
    const completed = items.filter(({ item }) => item.status === 'COMPLETED' && item.pk.startsWith('POST /payments#'));
    expect(scenario.test.get(Runs).of('create')).toBe(completed.length);
  });
});
