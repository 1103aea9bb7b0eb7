import { XMLParser } from 'fast-xml-parser';
import { junit, Report, table } from './report';

const run: Report = {
  tool: 'nestjs-dynamodb-idempotency conformance',
  version: '0.1.0',
  profile: 'module',
  target: 'POST http://127.0.0.1/charges?a=1&b=<2>',
  seed: 7,
  keyPrefix: 'p',
  repeat: 1,
  startedAt: '2026-12-07T10:00:00.000Z',
  durationMs: 1500,
  summary: { passed: 1, failed: 1, skipped: 1 },
  results: [
    {
      check: 'repeat.succeeds',
      level: 'precondition',
      source: 'flags',
      run: 1,
      scenario: 'repeat',
      says: 's',
      ms: 5,
      status: 'pass',
    },
    {
      check: 'repeat.same-answer',
      level: 'MUST',
      source: 'docs/replays.md',
      run: 1,
      scenario: 'repeat',
      says: 'a "retry" gets <the> first & only answer',
      ms: 5,
      status: 'fail',
      detail: `first 201 {"a":"<x>&'y'"}; then 201 {"a":"z"}`,
    },
    {
      check: 'kill-window.once-or-none',
      level: 'MUST',
      source: 'x',
      run: 1,
      scenario: 'kill-window',
      says: 'k',
      ms: 0,
      status: 'skip',
      detail: 'give --start <CMD>',
    },
  ],
};

describe('the conformance report', () => {
  it('JUnit: what the server answered, quotes, ampersands and angle brackets included, reads back exactly', () => {
    const xml = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '' }).parse(junit(run));
    const suite = xml.testsuites.testsuite;
    expect(suite.name).toBe('module #1: POST http://127.0.0.1/charges?a=1&b=<2>');
    const [, failed, skipped] = suite.testcase;
    expect(failed.name).toBe('repeat.same-answer: a "retry" gets <the> first & only answer');
    expect(failed.failure.message).toBe(`first 201 {"a":"<x>&'y'"}; then 201 {"a":"z"} (breaks docs/replays.md)`);
    expect(skipped.skipped.message).toBe('give --start <CMD>');
    expect(xml.testsuites).toMatchObject({ tests: '3', failures: '1', skipped: '1', time: '1.500' });
  });

  it('the table: a failure says what was seen and the source it breaks; the last line replays the run', () => {
    const lines = table(run);
    expect(lines).toContain(`      first 201 {"a":"<x>&'y'"}; then 201 {"a":"z"}`);
    expect(lines).toContain('      breaks: docs/replays.md');
    expect(lines.at(-1)).toBe('replay: --seed 7 --key-prefix p (on a server that has not seen these keys)');
  });
});
