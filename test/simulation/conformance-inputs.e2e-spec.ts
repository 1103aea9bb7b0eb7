import fc from 'fast-check';
import { ConformanceOptions, parseConformanceArgs, UsageError } from '../../libs/idempotency/src/conformance/options';
import { INPUT_RUNS, INPUT_SEED } from './inputs';

/**
 * The conformance kit's flags, generated: every flag with values a person (or a CI template with an empty variable)
 * might pass, numbers among them NaN, negatives, fractions, huge and empty. Each argument list is either refused with a
 * `UsageError` (exit 2, the help) or parsed into options that are all usable: whole numbers in their ranges, absolute
 * http(s) URLs, a known profile, a key header that is an HTTP token. Never another error, never a NaN let through.
 */
const number = fc.oneof(
  fc.integer({ min: -5, max: 2_000_000 }).map(String),
  fc.constantFrom('NaN', '', ' ', '1.5', '1e3', '0x10', 'Infinity', '-0', '007', '12abc', '9007199254740993'),
);
const url = fc.oneof(
  fc.constantFrom('http://127.0.0.1:1/x', 'https://api.example.com/orders', 'ftp://example.com', 'localhost:3000', ''),
  fc.webUrl(),
  fc.string(),
);
const flag = fc.oneof(
  fc.tuple(fc.constantFrom('--storm', '--large-bytes', '--timeout', '--patience', '--seed', '--repeat'), number),
  fc.tuple(fc.constantFrom('--url', '--effects-url', '--other-url', '--ready-url', '--mcp'), url),
  fc.tuple(fc.constant('--profile'), fc.constantFrom('module', 'ietf-07', 'stripe', 'paypal', '', 'MODULE')),
  fc.tuple(
    fc.constant('--kill-delays'),
    fc.array(number, { maxLength: 4 }).map((list) => list.join(',')),
  ),
  fc.tuple(
    fc.constant('--header'),
    fc.constantFrom('Authorization: Bearer x', 'no colon', ': empty', 'X-A:b', 'Bad Name: v'),
  ),
  fc.tuple(fc.constant('--key-header'), fc.constantFrom('Idempotency-Key', 'X-Request-Id', 'bad header', '')),
  fc.tuple(fc.constantFrom('--body', '--args', '--other-body', '--fail-body'), fc.oneof(fc.json(), fc.string())),
  fc.tuple(fc.constantFrom('--tool', '--key-arg', '--method', '--other-method', '--key-prefix'), fc.string()),
  fc.tuple(fc.constant('--only'), fc.constantFrom('repeat', 'storm,keys', 'kill-window', 'stampede', '')),
  fc.tuple(fc.constantFrom('--quiet', '--unknown-flag'), fc.constant(undefined)),
);

function usable(options: ConformanceOptions): void {
  const ranges: Array<[keyof ConformanceOptions, number, number]> = [
    ['storm', 2, 1000],
    ['largeBytes', 1, 100 * 1024 * 1024],
    ['timeoutMs', 1, 600_000],
    ['patienceMs', 1, 3_600_000],
    ['seed', 0, 2 ** 31 - 1],
    ['repeat', 1, 1000],
  ];
  for (const [name, min, max] of ranges) {
    const value = options[name] as number;
    if (!Number.isSafeInteger(value) || value < min || value > max) throw new Error(`${name} is ${value}`);
  }
  for (const delay of options.killDelays)
    if (!Number.isSafeInteger(delay) || delay < 0) throw new Error(`a kill delay is ${delay}`);
  for (const each of [options.url, options.effectsUrl, options.otherUrl, options.readyUrl]) {
    if (each !== undefined && !/^https?:$/.test(new URL(each).protocol)) throw new Error(`${each} is not http(s)`);
  }
  if (!['module', 'ietf-07', 'stripe'].includes(options.profile)) throw new Error(`profile ${options.profile}`);
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(options.keyHeader)) throw new Error(`key header ${options.keyHeader}`);
  for (const name of Object.keys(options.headers))
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new Error(`header ${name}`);
  if (options.mcp && (options.otherUrl || options.otherMethod)) throw new Error('--other-url taken with --mcp');
}

describe('generated conformance flags', () => {
  it(`are refused with a UsageError or parsed into usable options, never anything else (${INPUT_RUNS * 10} runs)`, () => {
    let parsed = 0;
    fc.assert(
      fc.property(fc.array(flag, { maxLength: 8 }), fc.boolean(), (flags, withUrl) => {
        const argv = [
          ...(withUrl ? ['--url', 'http://127.0.0.1:1/x'] : []),
          ...flags.flatMap(([name, value]) => (value === undefined ? [name] : [name, value])),
        ];
        let options: ConformanceOptions | undefined;
        try {
          options = parseConformanceArgs(argv);
        } catch (error) {
          if (error instanceof UsageError) return;
          throw error;
        }
        parsed++;
        usable(options!);
      }),
      { numRuns: INPUT_RUNS * 10, ...(INPUT_SEED === undefined ? {} : { seed: INPUT_SEED }) },
    );
    // The generator reaches both sides: some lists parse, the rest are refused.
    expect(parsed).toBeGreaterThan(0);
  });
});
