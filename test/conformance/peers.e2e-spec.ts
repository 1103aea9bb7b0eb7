import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DemoProcess, startDemoProcess } from '../support/demo-process';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { freePort } from '../support/free-port';
import { localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { startScript } from '../support/script-process';
import { createIdempotencyTable } from '../support/table';
import { conformance, failed, skipped, startServer } from './conformance-support';

const ROOT = join(__dirname, '..', '..');

let work: string;
beforeAll(() => (work = mkdtempSync(join(tmpdir(), 'conformance-peers-'))));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/**
 * The kit against real implementations: the demo (this module) must pass its own profile over HTTP and MCP; Powertools'
 * makeIdempotent in a plain Express app, run through the IETF draft's profile and ours, gives docs/comparison.md's row.
 */
describe('the conformance kit against the demo', () => {
  let demo: DemoProcess;
  beforeAll(async () => (demo = await startDemoProcess({})), 60_000);
  afterAll(() => demo?.kill());

  it.each(['module', 'ietf-07'])(
    'POST /payments/charges passes the %s profile: every check but the kill window (no --start) met',
    async (profile) => {
      const { code, report } = await conformance(work, [
        ...['--url', `${demo.url}/payments/charges`, '--body', '{"amount":1250,"currency":"eur"}'],
        ...['--effects-url', `${demo.url}/payments/charges?key={key}`, '--fail-body', '{"amount":-1}'],
        ...['--other-url', `${demo.url}/payments/receipts`, '--profile', profile],
      ]);
      expect(failed(report!)).toEqual([]);
      expect(skipped(report!)).toEqual(['kill-window.once-or-none']);
      expect(report!.summary.passed).toBe(profile === 'module' ? 20 : 10);
      expect(code).toBe(0);
    },
    60_000,
  );

  it('the place_order MCP tool passes the module profile where it applies (the key is an argument)', async () => {
    const { code, report } = await conformance(work, [
      ...['--mcp', `${demo.url}/mcp`, '--tool', 'place_order', '--key-arg', 'idempotencyKey'],
      ...['--args', '{"item":"book","quantity":1}', '--effects-url', `${demo.url}/orders?key={key}`],
    ]);
    expect(failed(report!)).toEqual([]);
    // The header's forms (a list, the quoted key), another route and a failing body do not apply; the rest ran.
    expect(skipped(report!)).toEqual([
      'other-route.not-mixed',
      'keys.list',
      'keys.quoted',
      'failing-first.module',
      'kill-window.once-or-none',
    ]);
    expect(code).toBe(0);
  }, 60_000);
});

describe('the conformance kit against an MCP tool whose key comes in _meta (two-process MCP app)', () => {
  it('pay: the module profile met, the key in the call\'s _meta["idempotency-key"]', async () => {
    const { endpoint, stop } = await startStore('dynalite');
    const tableName = uniqueTableName('mcp_meta');
    await createIdempotencyTable(localClient(endpoint), tableName);
    const env = { DYNAMODB_ENDPOINT: endpoint, IDEMPOTENCY_TABLE: tableName, EFFECTS: join(work, 'mcp-effects.log') };
    const server = await startScript(join(ROOT, 'test/mcp/mcp-app.script.ts'), env);
    try {
      const { port } = server.ready as { port: number };
      const { code, report } = await conformance(work, [
        ...['--mcp', `http://127.0.0.1:${port}/mcp`, '--tool', 'pay', '--args', '{"amount":5,"delayMs":200}'],
      ]);
      expect(failed(report!)).toEqual([]);
      expect(report!.summary.passed).toBeGreaterThanOrEqual(11);
      expect(code).toBe(0);
    } finally {
      await server.kill();
      await stop();
    }
  }, 60_000);
});

// DynamoDB Local: its transactions commit each order with its key's completion (commitWith), so a crash leaves both
// or neither: the kill window finds every rung once or none. On dynalite (no transactions) the order is written
// before the completion, and a kill between the two would run it again.
describeOnDynamoDbLocal('the conformance kit against the demo, SIGKILLed by the kit (DynamoDB Local)', () => {
  it('POST /orders: a kill at any rung leaves one order with its answer, or none; every other check met', async () => {
    const { endpoint } = await startStore('dynamodb-local');
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env = [
      ...[`PORT=${port}`, 'MICROSERVICE_PORT=0', `DYNAMODB_ENDPOINT=${endpoint}`, 'RECONCILE_INTERVAL_SECONDS=0'],
      ...[`IDEMPOTENCY_TABLE=${uniqueTableName('killed')}`, `ORDERS_TABLE=${uniqueTableName('killed_orders')}`],
      // The handler takes 300 ms, so the ladder's middle rungs kill it mid-run; a dead owner's lease ends in 2 s.
      ...['ORDER_PROCESSING_DELAY_MS=300', 'IDEMPOTENCY_PENDING_TTL_SECONDS=2', 'LOG_LEVEL=error', 'NO_COLOR=1'],
      ...['AWS_EC2_METADATA_DISABLED=true', 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true'],
    ];
    const start = `cd "${ROOT}" && env ${env.join(' ')} "${process.execPath}" test/support/run-ts.cjs apps/orders-api/src/main.ts`;
    const { code, report } = await conformance(work, [
      ...['--url', `${url}/orders`, '--body', '{"item":"book","quantity":2}', '--other-method', 'PUT'],
      ...['--effects-url', `${url}/orders?key={key}`, '--fail-body', '{"item":"","quantity":0}'],
      ...['--start', start, '--ready-url', `${url}/health`, '--kill-delays', '0,50,150,300,600'],
      ...['--only', 'repeat,storm,other-body,kill-window'],
    ]);
    expect(failed(report!)).toEqual([]);
    expect(skipped(report!)).toEqual([]);
    const rungs = report!.results.find((each) => each.check === 'kill-window.once-or-none')!;
    expect(rungs.detail).toMatch(
      /^0 ms (once|none), 50 ms (once|none), 150 ms (once|none), 300 ms (once|none), 600 ms once$/,
    );
    expect(code).toBe(0);
  }, 180_000);
});

describe("the conformance kit against Powertools' makeIdempotent in a plain Express app (docs/comparison.md)", () => {
  const flags = (url: string) => [
    ...['--url', `${url}/charges`, '--body', '{"amount":100,"currency":"eur"}', '--other-method', 'PUT'],
    ...['--effects-url', `${url}/charges?key={key}`, '--fail-body', '{"amount":1,"fail":true}'],
  ];

  it.each([
    ['ietf-07', []],
    ['module', ['repeat.replay-marker', 'other-body.problem', 'keys.long', 'keys.list']],
  ])(
    'the %s profile: %j fail',
    async (profile, expected) => {
      const server = await startServer(join(__dirname, 'powertools-server.mjs'));
      try {
        const { report } = await conformance(work, [...flags(server.url), '--profile', profile as string]);
        expect(failed(report!)).toEqual(expected);
        expect(skipped(report!)).toEqual(['kill-window.once-or-none']);
      } finally {
        await server.stop();
      }
    },
    60_000,
  );

  it('the kill window: a kill between the charge and its completion runs the charge again once the lock ends', async () => {
    const store = await startDynalite();
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const server = join(__dirname, 'powertools-server.mjs');
    const charges = join(work, 'powertools-charges.jsonl');
    const start = `"${process.execPath}" "${server}" --port ${port} --endpoint ${store.endpoint} --charges "${charges}" --work-ms 1500`;
    try {
      const { report } = await conformance(work, [
        ...flags(url),
        ...['--start', start, '--ready-url', `${url}/health`, '--only', 'kill-window', '--kill-delays', '0,700,2500'],
      ]);
      // The charge is made within a few hundred ms of the request, its completion 1.5 s later: the 700 ms kill lands
      // between. The record stays INPROGRESS until its 2 s lock ends; then the retry takes it over and charges again.
      expect(failed(report!)).toEqual(['kill-window.once-or-none']);
      const rungs = report!.results.find((each) => each.check === 'kill-window.once-or-none')!;
      expect(rungs.detail).toMatch(/^killed at 700 ms: twice, 2 effect\(s\), answered 201 [^;]*$/); // that rung alone
    } finally {
      await store.stop();
    }
  }, 120_000);
});
