import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Ajv from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { XMLParser } from 'fast-xml-parser';
import { runConformance } from '../../libs/idempotency/src/conformance/run';
import { freePort } from '../support/free-port';
import { conformance, failed, skipped, startServer } from './conformance-support';

const SERVER = join(__dirname, 'flawed-server.mjs');
const ROOT = join(__dirname, '..', '..');
let work: string;
beforeAll(() => (work = mkdtempSync(join(tmpdir(), 'conformance-'))));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/**
 * Each flaw of flawed-server.mjs and the checks it breaks (flaws.json, which `npm run test:package` reads too): the
 * kill window's flaws run under --start, the others without, and the right server (`none`) both ways.
 */
const FLAWS = Object.entries(
  JSON.parse(readFileSync(join(__dirname, 'flaws.json'), 'utf8')) as Record<string, string[]>,
);
const underStart = (breaks: string[]) => breaks.includes('kill-window.once-or-none');

/** The kit's flags for the flawed server at `url`, every scenario able to run. */
const target = (url: string) => [
  ...['--url', `${url}/charges`, '--body', '{"amount":100,"currency":"eur"}'],
  ...['--effects-url', `${url}/charges?key={key}`, '--fail-body', '{"amount":1,"fail":true}', '--other-method', 'PUT'],
];

describe('the conformance kit against servers wrong in one classic way each (module profile)', () => {
  it.concurrent.each(FLAWS.filter(([, breaks]) => !underStart(breaks)))(
    '%s: caught by the scenario that should catch it (%j), nothing else fails',
    async (flaw, expected) => {
      const server = await startServer(SERVER, ['--flaw', flaw]);
      try {
        const { code, report, text } = await conformance(work, target(server.url));
        expect(failed(report!)).toEqual(expected);
        expect(skipped(report!)).toEqual(['kill-window.once-or-none']);
        expect(code).toBe(expected.length > 0 ? 1 : 0);
        for (const check of expected) expect(text).toMatch(new RegExp(`^FAIL  ${check.replace('.', '\\.')} `, 'm'));
      } finally {
        await server.stop();
      }
    },
    60_000,
  );

  it.concurrent.each(FLAWS.filter(([flaw, breaks]) => flaw === 'none' || underStart(breaks)))(
    'the kill window on %s (the kit starts and SIGKILLs it): %j fail, nothing else',
    async (flaw, expected) => {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const state = join(work, `${flaw}-state.json`);
      const { code, report } = await conformance(work, [
        ...target(url),
        ...['--start', `"${process.execPath}" "${SERVER}" --port ${port} --flaw ${flaw} --state "${state}"`],
        ...['--ready-url', `${url}/health`],
      ]);
      expect(failed(report!)).toEqual(expected);
      expect(skipped(report!)).toEqual([]);
      const rungs = report!.results.find((each) => each.check === 'kill-window.once-or-none')!;
      if (flaw === 'none')
        expect(rungs.detail).toBe(
          '0 ms once, 5 ms once, 10 ms once, 20 ms once, 50 ms once, 100 ms once, 200 ms once, 500 ms once',
        );
      // The charge and its answer are written a second apart (50 ms after the request arrives): the later rungs land
      // between. Lost answer: the retry runs again. Answer first: the retry gets an answer whose charge never happened.
      else if (flaw === 'loses-completion') expect(rungs.detail).toMatch(/killed at \d+ ms: twice, 2 effect\(s\)/);
      else expect(rungs.detail).toMatch(/killed at \d+ ms: torn, an answer without its effect: 0 effect\(s\)/);
      expect(code).toBe(expected.length > 0 ? 1 : 0);
    },
    120_000,
  );
});

describe('the conformance kit: outputs, seeds and usage', () => {
  it('--json matches docs/conformance.schema.json and --junit is JUnit XML with the same counts', async () => {
    const server = await startServer(SERVER, ['--flaw', 'replays-mismatch']);
    const junit = join(work, 'junit.xml');
    try {
      const { report, json } = await conformance(work, [...target(server.url), '--junit', junit, '--repeat', '2']);
      const ajv = new Ajv({ strict: true, allErrors: true });
      addFormats(ajv);
      const validate = ajv.compile(JSON.parse(readFileSync(join(ROOT, 'docs/conformance.schema.json'), 'utf8')));
      expect(validate(JSON.parse(readFileSync(json, 'utf8'))) || validate.errors).toBe(true);
      expect(report!.summary).toEqual({ passed: 38, failed: 2, skipped: 2 });
      const xml = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '' }).parse(
        readFileSync(junit, 'utf8'),
      );
      const suites = xml.testsuites.testsuite as Array<Record<string, unknown>>;
      expect(suites).toHaveLength(2);
      expect(xml.testsuites).toMatchObject({ tests: '42', failures: '2', skipped: '2', errors: '0' });
      const cases = suites.flatMap((suite) => suite.testcase as Array<Record<string, { message: string }>>);
      expect(cases).toHaveLength(42);
      expect(cases.filter((each) => each.failure).map((each) => each.failure.message)).toEqual([
        expect.stringMatching(/^answered 201 .* \(breaks docs\/keys-and-fingerprints\.md \(fingerprint-mismatch\)\)$/),
        expect.stringMatching(/^answered 201 /),
      ]);
    } finally {
      await server.stop();
    }
  }, 60_000);

  it('--seed with --key-prefix replays a run: the same requests, bodies and keys (storm retries apart); another seed sends another body', async () => {
    const logs: string[] = [];
    for (const seed of ['7', '7', '8']) {
      const log = join(work, `requests-${logs.length}.log`);
      const server = await startServer(SERVER, ['--log', log]);
      try {
        await conformance(work, [...target(server.url), '--seed', seed, '--key-prefix', 'replayed']);
      } finally {
        await server.stop();
      }
      // Each distinct request once: how often a storm's duplicates retry their 409s depends on the machine's timing.
      logs.push([...new Set(readFileSync(log, 'utf8').split('\n'))].sort().join('\n'));
    }
    expect(logs[0].split('\n').length).toBeGreaterThan(12);
    expect(logs[1]).toBe(logs[0]);
    expect(logs[2]).not.toBe(logs[0]);
  }, 60_000);

  it.each([
    [['--url', 'http://127.0.0.1:1/x', '--storm', 'NaN'], /--storm must be a whole number from 2 to 1000, not "NaN"/],
    [['--url', 'http://127.0.0.1:1/x', '--profile', 'paypal'], /--profile must be one of module, ietf-07, stripe/],
    [['--url', 'ftp://example.com/x'], /--url must be an absolute http\(s\) URL/],
    [['--url', 'http://127.0.0.1:1/x', '--header', 'no colon'], /--header must be "Name: value"/],
    [['--url', 'http://127.0.0.1:1/x', '--only', 'storm,stampede'], /--only: no scenario stampede/],
    [['--mcp', 'http://127.0.0.1:1/mcp'], /--mcp needs --tool/],
    [['--mcp', 'http://127.0.0.1:1/mcp', '--tool', 't', '--fail-body', 'oops'], /--fail-body must be a JSON object/],
    [['--mcp', 'http://127.0.0.1:1/mcp', '--tool', 't', '--other-url', 'http://127.0.0.1:1/b'], /not MCP tools/],
    [['--url', 'http://127.0.0.1:1/x', '--kill-delays', '5,-1'], /--kill-delays must be a whole number/],
    [['--body', '{}'], /--url \(an HTTP request\) or --mcp \(an MCP server\) is required/],
  ])('%j: a usage error (exit 2), nothing sent', async (args, message) => {
    const errors: string[] = [];
    const code = await runConformance(args, { log: () => undefined, error: (line) => errors.push(line) });
    expect(code).toBe(2);
    expect(errors.join('\n')).toMatch(message);
    expect(errors.join('\n')).toContain('Usage: nestjs-dynamodb-idempotency conformance');
  });

  it('a target that never answers: it cannot be checked (exit 2), not a row of failures', async () => {
    const port = await freePort();
    const { code, errors } = await conformance(work, ['--url', `http://127.0.0.1:${port}/charges`, '--body', '{}']);
    expect(code).toBe(2);
    expect(errors).toBe(`The target cannot be checked: http://127.0.0.1:${port}/charges did not answer (ECONNREFUSED)`);
  });

  it('a --start command that exits before it is ready: it cannot be checked (exit 2), its stderr shown', async () => {
    const port = await freePort();
    const { code, errors } = await conformance(work, [
      ...['--url', `http://127.0.0.1:${port}/charges`, '--effects-url', `http://127.0.0.1:${port}/charges`],
      ...['--start', `"${process.execPath}" -e "console.error('no table'); process.exit(3)"`],
    ]);
    expect(code).toBe(2);
    expect(errors).toMatch(
      /^The target cannot be checked: --start .* exited before http:\/\/127\.0\.0\.1:\d+\/ answered; its stderr ended with:\nno table/,
    );
  });

  it('an effects URL that does not answer a count: the target cannot be checked (exit 2), said plainly', async () => {
    const server = await startServer(SERVER);
    try {
      const { code, errors } = await conformance(work, [
        ...['--url', `${server.url}/charges`, '--body', '{"amount":1}', '--effects-url', `${server.url}/health`],
      ]);
      expect(code).toBe(2);
      expect(errors).toMatch(/The target cannot be checked: --effects-url answered 200 \{"ok":true\}: not a number/);
    } finally {
      await server.stop();
    }
  });
});
