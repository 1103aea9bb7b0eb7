import fc from 'fast-check';
import { IdempotencyRepository, ProblemType } from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { parseKeyHeader } from '../../libs/idempotency/src/keys/idempotency-key';
import { PLATFORMS, post } from '../support/app';
import { rawPost } from '../support/raw-http';
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

  /**
   * What the README promises for a key, stated from the bytes on the wire: Node refuses C0 control bytes (other than
   * tab) and DEL in a header value itself; the value is read as UTF-8 when it is valid UTF-8, else as Latin-1; spaces
   * and tabs around it are dropped and `"…"` quotes removed. A key of 1–255 characters without control characters
   * and without a comma (a list) is accepted; anything else is a 400 `key-invalid`.
   */
  function promised(bytes: Buffer): 'accepted' | 'refused-by-node' | 'key-invalid' {
    if (bytes.some((byte) => (byte < 0x20 && byte !== 0x09) || byte === 0x7f)) return 'refused-by-node';
    const utf8 = bytes.toString('utf8');
    const text = Buffer.from(utf8, 'utf8').equals(bytes) ? utf8 : bytes.toString('latin1');
    let key = text.replace(/^[ \t]+|[ \t]+$/g, '');
    const quoted = /^"(.*)"$/s.exec(key);
    if (quoted) {
      if (quoted[1].includes('"')) return 'key-invalid';
      key = quoted[1];
    }
    const length = [...key].length;
    const ok = length >= 1 && length <= 255 && !/\p{Cc}/u.test(key) && !key.includes(',');
    return ok ? 'accepted' : 'key-invalid';
  }

  it('random keys (UTF-8 text, code points of every kind, raw bytes): accepted exactly when the README says so', async () => {
    const tenant = `hostile-keys-${platform}`;
    const body = JSON.stringify({ amount: 1 }); // one body for every key: a repeated key is a replay, not a mismatch
    const headers = (key: Buffer): Array<[string, Buffer | string]> => [
      ...json,
      ['x-tenant', tenant],
      ['Idempotency-Key', key],
    ];
    const keyBytes = fc.oneof(
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).map((text) => Buffer.from(text, 'utf8')),
      fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 300 }).map((text) => Buffer.from(text, 'utf8')),
      fc.string({ unit: 'binary', maxLength: 30 }).map((text) => Buffer.from(text.replace(/[\r\n]/g, ''), 'utf8')),
      fc
        .uint8Array({ minLength: 0, maxLength: 40 })
        .map((bytes) => Buffer.from(bytes.filter((b) => b !== 10 && b !== 13))),
    );
    const accepted = new Set<string>();
    const seen = { accepted: 0, 'key-invalid': 0, 'refused-by-node': 0 };
    const runsBefore = scenario.test.get(Runs).of('create');
    await fc.assert(
      fc.asyncProperty(keyBytes, async (key) => {
        const expected = promised(key);
        seen[expected] += 1;
        const first = await rawPost(url(), '/payments', headers(key), body);
        const second = await rawPost(url(), '/payments', headers(key), body);
        if (expected === 'accepted') {
          expect(first.status).toBe(201);
          expect(second.status).toBe(201);
          expect(second.headers.toLowerCase()).toContain('idempotent-replayed: true');
          accepted.add(key.toString('latin1'));
        } else {
          expect([first.status, second.status]).toEqual([400, 400]);
          if (expected === 'key-invalid') expect(first.body).toContain(ProblemType.keyInvalid);
        }
      }),
      { numRuns: 150 },
    );
    // Every kind of answer was exercised, and every accepted key ran once and is COMPLETED (never left PENDING).
    expect(seen.accepted).toBeGreaterThan(50);
    expect(seen['key-invalid']).toBeGreaterThan(5);
    expect(seen['refused-by-node']).toBeGreaterThan(5);
    expect(scenario.test.get(Runs).of('create') - runsBefore).toBeLessThanOrEqual(accepted.size);
    for (const key of accepted) {
      const stored = await scenario.test
        .get(IdempotencyRepository)
        .get({ key: recordKey('POST /payments', tenant, parseKeyHeader(key)!) });
      expect(stored?.status).toBe('COMPLETED');
    }
  });

  it('oversized keys and repeated headers: 4xx', async () => {
    const body = '{"amount":1}';
    const tenKb = await rawPost(url(), '/payments', [...json, ['Idempotency-Key', 'k'.repeat(10 * 1024)]], body);
    const huge = await rawPost(url(), '/payments', [...json, ['Idempotency-Key', 'k'.repeat(20 * 1024)]], body);
    const repeated = await rawPost(
      url(),
      '/payments',
      [...json, ['Idempotency-Key', 'a'], ['Idempotency-Key', 'b']],
      body,
    );
    expect(tenKb.status).toBe(400);
    expect(huge.status).toBe(431); // Node's own header size limit, before the app
    expect(repeated.status).toBe(400);
  });

  it.each([
    [
      'nested 10,000 levels deep',
      `{"amount":1,"nested":${'['.repeat(10_000)}${']'.repeat(10_000)}}`,
      'application/json',
    ],
    ['nested 65 levels deep', `{"amount":1,"nested":${'['.repeat(65)}${']'.repeat(65)}}`, 'application/json'],
    ['invalid JSON', '{"amount":', 'application/json'],
    ['2 MB of JSON', JSON.stringify({ amount: 1, pad: 'x'.repeat(2 * 1024 * 1024) }), 'application/json'],
    ['text/plain', 'amount=1', 'text/plain'],
    ['a form', 'amount=1', 'application/x-www-form-urlencoded'],
    ['binary', '\u0000\u0001\u0002', 'application/octet-stream'],
  ])('a body that is %s: refused, the key is not left PENDING and is usable afterwards', async (_, body, type) => {
    const key = `hostile-${platform}-${type}-${body.length}`;
    const response = await rawPost(
      url(),
      '/payments',
      [
        ['Content-Type', type],
        ['Idempotency-Key', key],
      ],
      body,
    );
    if (platform === 'express' && (type === 'text/plain' || type === 'application/octet-stream')) {
      // No parser for it on this app: 415, as Fastify answers such a body itself.
      expect(response.status).toBe(415);
      expect(JSON.parse(response.body).type).toBe(ProblemType.bodyUnreadable);
    } else {
      expect(response.status).toBeGreaterThanOrEqual(400);
      expect(response.status).toBeLessThan(500);
    }
    const record = await scenario.test
      .get(IdempotencyRepository)
      .get({ key: recordKey('POST /payments', undefined, key) });
    expect(record?.status).not.toBe('PENDING');
    const runsBefore = scenario.test.get(Runs).of('create');
    const valid = await post(`${url()}/payments`, { amount: 5 }, { 'Idempotency-Key': key });
    expect(valid.status).toBe(201);
    expect(scenario.test.get(Runs).of('create')).toBe(runsBefore + 1);
  });
});
