import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

/** A usage error: exit code 2, with the help. */
export class UsageError extends Error {}

export const PROFILE_NAMES = ['module', 'ietf-07', 'stripe'] as const;
export type ProfileName = (typeof PROFILE_NAMES)[number];

/** The kill window's delays after sending, in ms, unless `--kill-delays` says otherwise. */
export const DEFAULT_KILL_DELAYS = [0, 5, 10, 20, 50, 100, 200, 500];

/** What `conformance` was asked to check, every flag validated. */
export interface ConformanceOptions {
  profile: ProfileName;
  /** HTTP: the request under test. MCP: the server's Streamable HTTP endpoint. */
  url: string;
  method: string;
  /** The request body as sent (HTTP); the tool's arguments as JSON text (MCP). */
  body?: string;
  headers: Record<string, string>;
  keyHeader: string;
  effectsUrl?: string;
  otherUrl?: string;
  otherMethod?: string;
  otherBody?: string;
  failBody?: string;
  mcp?: { tool: string; keyArg?: string };
  storm: number;
  largeBytes: number;
  timeoutMs: number;
  /** How long a client retries a 409 or a restart before it gives up, in ms. */
  patienceMs: number;
  start?: string;
  readyUrl?: string;
  killDelays: number[];
  only?: string[];
  seed: number;
  keyPrefix: string;
  repeat: number;
  json?: string;
  junit?: string;
  quiet: boolean;
}

const FLAGS = {
  url: { type: 'string' },
  method: { type: 'string' },
  body: { type: 'string' },
  'body-file': { type: 'string' },
  header: { type: 'string', multiple: true },
  'key-header': { type: 'string' },
  'effects-url': { type: 'string' },
  'other-url': { type: 'string' },
  'other-method': { type: 'string' },
  'other-body': { type: 'string' },
  'fail-body': { type: 'string' },
  mcp: { type: 'string' },
  tool: { type: 'string' },
  args: { type: 'string' },
  'key-arg': { type: 'string' },
  profile: { type: 'string' },
  storm: { type: 'string' },
  'large-bytes': { type: 'string' },
  timeout: { type: 'string' },
  patience: { type: 'string' },
  start: { type: 'string' },
  'ready-url': { type: 'string' },
  'kill-delays': { type: 'string' },
  only: { type: 'string' },
  seed: { type: 'string' },
  'key-prefix': { type: 'string' },
  repeat: { type: 'string' },
  json: { type: 'string' },
  junit: { type: 'string' },
  quiet: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

/** Parses `conformance`'s flags; `undefined` when help was asked for. Throws `UsageError` on any flag it cannot use. */
export function parseConformanceArgs(argv: string[]): ConformanceOptions | undefined {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: FLAGS, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const values = parsed.values;
  if (values.help) return undefined;
  const mcpUrl = values.mcp;
  const url = mcpUrl ?? values.url;
  if (!url) throw new UsageError('--url (an HTTP request) or --mcp (an MCP server) is required');
  if (mcpUrl && values.url) throw new UsageError('--url and --mcp exclude each other');
  if (mcpUrl && !values.tool) throw new UsageError('--mcp needs --tool');
  if (mcpUrl && (values['other-url'] || values['other-method']))
    throw new UsageError('--other-url and --other-method are for HTTP routes, not MCP tools');
  if (values.body !== undefined && values['body-file'] !== undefined)
    throw new UsageError('--body and --body-file exclude each other');
  const body = mcpUrl ? (values.args ?? '{}') : (values.body ?? readBodyFile(values['body-file']));
  if (mcpUrl) for (const flag of ['args', 'other-body', 'fail-body'] as const) jsonObject(`--${flag}`, values[flag]);
  const profile = (values.profile ?? 'module') as ProfileName;
  if (!PROFILE_NAMES.includes(profile))
    throw new UsageError(`--profile must be one of ${PROFILE_NAMES.join(', ')}, not ${values.profile}`);
  return {
    profile,
    url: absoluteUrl(mcpUrl ? '--mcp' : '--url', url),
    method: (values.method ?? 'POST').toUpperCase(),
    ...(body === undefined ? {} : { body }),
    headers: headerList(values.header ?? []),
    keyHeader: token('--key-header', values['key-header'] ?? 'Idempotency-Key'),
    ...optional('effectsUrl', values['effects-url'] && absoluteUrl('--effects-url', values['effects-url'])),
    ...optional('otherUrl', values['other-url'] && absoluteUrl('--other-url', values['other-url'])),
    ...optional('otherMethod', values['other-method']?.toUpperCase()),
    ...optional('otherBody', values['other-body']),
    ...optional('failBody', values['fail-body']),
    ...(mcpUrl ? { mcp: { tool: values.tool!, ...optional('keyArg', values['key-arg']) } } : {}),
    storm: integer('--storm', values.storm, 20, 2, 1000),
    largeBytes: integer('--large-bytes', values['large-bytes'], 262_144, 1, 100 * 1024 * 1024),
    timeoutMs: integer('--timeout', values.timeout, 10_000, 1, 600_000),
    patienceMs: integer('--patience', values.patience, 60_000, 1, 3_600_000),
    ...optional('start', values.start),
    ...optional('readyUrl', values['ready-url'] && absoluteUrl('--ready-url', values['ready-url'])),
    killDelays: values['kill-delays'] === undefined ? DEFAULT_KILL_DELAYS : delays(values['kill-delays']),
    ...optional(
      'only',
      values.only?.split(',').map((each) => each.trim()),
    ),
    seed: integer('--seed', values.seed, randomBytes(4).readUInt32BE() >>> 1, 0, 2 ** 31 - 1),
    keyPrefix: token('--key-prefix', values['key-prefix'] ?? `conformance-${randomBytes(4).toString('hex')}`),
    repeat: integer('--repeat', values.repeat, 1, 1, 1000),
    ...optional('json', values.json),
    ...optional('junit', values.junit),
    quiet: values.quiet ?? false,
  };
}

function optional<K extends string, V>(name: K, value: V | undefined | '' | false): { [P in K]?: V } {
  return (value === undefined || value === '' || value === false ? {} : { [name]: value }) as { [P in K]?: V };
}

function readBodyFile(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--body-file ${path}: ${(error as Error).message}`);
  }
}

function absoluteUrl(flag: string, value: string): string {
  try {
    const url = new URL(value);
    if (url.protocol === 'http:' || url.protocol === 'https:') return value;
  } catch {
    // reported below
  }
  throw new UsageError(`${flag} must be an absolute http(s) URL, not ${JSON.stringify(value)}`);
}

function integer(flag: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const number = /^\d+$/.test(value.trim()) ? Number(value) : NaN;
  if (!Number.isSafeInteger(number) || number < min || number > max)
    throw new UsageError(`${flag} must be a whole number from ${min} to ${max}, not ${JSON.stringify(value)}`);
  return number;
}

function delays(value: string): number[] {
  const list = value.split(',').map((each) => integer('--kill-delays', each, 0, 0, 600_000));
  if (list.length === 0) throw new UsageError('--kill-delays needs at least one delay');
  return list;
}

function token(flag: string, value: string): string {
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value))
    throw new UsageError(
      `${flag} must be an HTTP token (letters, digits, - and the like), not ${JSON.stringify(value)}`,
    );
  return value;
}

function headerList(list: string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const each of list) {
    const colon = each.indexOf(':');
    if (colon <= 0) throw new UsageError(`--header must be "Name: value", not ${JSON.stringify(each)}`);
    headers[token('--header', each.slice(0, colon).trim())] = each.slice(colon + 1).trim();
  }
  return headers;
}

/** An MCP tool's arguments: a JSON object, when given. */
function jsonObject(flag: string, text: string | undefined): void {
  if (text === undefined) return;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError(`${flag} must be a JSON object`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new UsageError(`${flag} must be a JSON object`);
}

export const CONFORMANCE_HELP = `Usage: nestjs-dynamodb-idempotency conformance --url URL [flags]
       nestjs-dynamodb-idempotency conformance --mcp URL --tool NAME [--args JSON] [--key-arg NAME] [flags]

Checks, from outside, that a running HTTP API (or an MCP server's tool) keeps the idempotency promise of a profile,
and names the requirement each failure breaks. See docs/conformance.md.

The target:
  --url URL               the request under test (any idempotent route of yours)
  --method METHOD         its method (default POST)
  --body JSON | --body-file FILE    its body
  --header "Name: value"  a header to send on every request (repeatable: auth, content type)
  --key-header NAME       the key's header (default Idempotency-Key)
  --effects-url URL       where the kit reads how often a key's request took effect: {key} in it is replaced by the
                          key (else ?key= is added); it answers a number or a JSON list (its length is the count).
                          Without it, "ran once" cannot be told from "answered once" and those checks are skipped
  --other-url URL, --other-method METHOD   another idempotent route, for "the same key elsewhere is not mixed"
  --other-body JSON       a different body for the same route (default: the body with its first number or string
                          changed)
  --fail-body JSON        a body the route answers with an error, for "a failing first attempt"
  --mcp URL --tool NAME --args JSON --key-arg NAME    an MCP tool over Streamable HTTP instead (the key in the call's
                          _meta["idempotency-key"] unless --key-arg names an argument)

What to check:
  --profile NAME          module (default: this module's contract), ietf-07 (the IETF draft), stripe (Stripe's docs)
  --only LIST             these scenarios alone (comma-separated), e.g. repeat,storm
  --storm N               concurrent duplicates in the storm (default 20)
  --large-bytes N         the large body's size (default 262144)
  --start "CMD"           the kill window: start the server with CMD (a shell command), SIGKILL its process group at
                          each delay after sending, start it again, retry until answered, judge each rung
  --ready-url URL         answers once the server is up (default: --url's origin)
  --kill-delays LIST      the ladder, in ms (default ${DEFAULT_KILL_DELAYS.join(',')})
  --timeout MS            one request's time limit (default 10000); --patience MS: how long a retry goes on (60000)

How to run and report:
  --seed N                replays a run: the same requests in the same order (with the same --key-prefix, on a
                          server that has not seen those keys)
  --key-prefix TEXT       the keys' prefix (default conformance-<random>)
  --repeat N              the whole run N times, fresh keys each time
  --json FILE             the results as JSON (- for stdout); --junit FILE: as JUnit XML
  --quiet                 no progress line

Exit codes: 0 every requirement met, 1 one failed, 2 usage (or the target never answered).`;
