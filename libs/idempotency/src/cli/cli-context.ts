import { LoggerService } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { isLocalEndpoint } from '../dynamodb/table-checks';
import { TableLayout, TableLayoutOptions } from '../dynamodb/table-layout';
import { DEFAULT_TABLE_NAME } from '../idempotency.constants';
import type { IdempotencyModuleOptions } from '../options/idempotency.options';
import { EncryptionOptions, ResponseSealer } from '../response/response-sealing';

/** Where the CLI writes; the console by default, a buffer in tests. */
export interface CliOutput {
  log(line: string): void;
  error(line: string): void;
  /** Asks a yes/no question (on a terminal); absent, a command that would ask needs --yes. */
  confirm?(question: string): Promise<boolean>;
}

/** One command of the binary: its help and what it runs (it returns the exit code). */
export interface CliCommand {
  summary: string;
  usage: string;
  flags: Record<string, { type: 'string' | 'boolean' }>;
  run(context: CliContext): Promise<number>;
}

/** A usage error: exit code 2, with the command's help. */
export class UsageError extends Error {}

/** Flags every command takes: where the table is, its layout, and how to print. */
export const COMMON_FLAGS = {
  table: { type: 'string' },
  region: { type: 'string' },
  endpoint: { type: 'string' },
  'partition-key': { type: 'string' },
  'sort-key': { type: 'string' },
  'key-prefix': { type: 'string' },
  'in-flight-index': { type: 'string' },
  'no-in-flight-index': { type: 'boolean' },
  config: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

export const COMMON_HELP = `Where the table is (flags over --config over the environment):
  --table NAME             the table (IDEMPOTENCY_TABLE; default idempotency_keys)
  --region REGION          AWS_REGION (default us-east-1)
  --endpoint URL           DYNAMODB_ENDPOINT (default AWS's own; a local endpoint gets dummy credentials)
  --partition-key NAME     the table's partition key (IDEMPOTENCY_PARTITION_KEY; default pk)
  --sort-key NAME          its sort key, for a single-table layout (IDEMPOTENCY_SORT_KEY; default none)
  --key-prefix TEXT        the prefix of the module's key values (IDEMPOTENCY_KEY_PREFIX; default none)
  --in-flight-index NAME   the index of keys in flight (default in_flight); --no-in-flight-index: none (table:create
                           leaves it out; sweeps and PENDING listings read the whole table)
  --config FILE.json       the module's options as JSON: tableName, keySchema, attributeNames, keyPrefix, inFlightIndex,
                           partitionKeyValue (a fixed string), encryption, pendingTtlSeconds,
                           clockSkewSeconds, failedTtlSeconds
  --json                   print JSON instead of text
  --help                   this help`;

/** What every command gets: its parsed flags, the table and its layout, a client, and how to print. */
export interface CliContext {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  tableName: string;
  layout: TableLayoutOptions;
  encryption?: EncryptionOptions;
  /** The --config file as read (empty without one). */
  config: ConfigFile;
  client: DynamoDBClient;
  /** The endpoint given (none: AWS's own), and whether it is a local one (DynamoDB Local, dynalite, LocalStack). */
  endpoint?: string;
  local: boolean;
  where: string;
  json: boolean;
  out: CliOutput;
  /** Prints a value: JSON with --json, else the text lines. */
  print(value: unknown, lines: string[]): void;
}

/** Parses a command's flags (the common ones and its own) and opens a client; throws `UsageError` on bad flags. */
export function cliContext(
  argv: string[],
  flags: Record<string, { type: 'string' | 'boolean' }>,
  out: CliOutput,
): CliContext {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { ...COMMON_FLAGS, ...flags } });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  const config = values.config ? readConfig(String(values.config)) : {};
  const text = (name: string) => (typeof values[name] === 'string' ? (values[name] as string) : undefined);
  const tableName = text('table') ?? config.tableName ?? process.env.IDEMPOTENCY_TABLE ?? DEFAULT_TABLE_NAME;
  const env = (name: string) => process.env[name] || undefined;
  const partitionKey = text('partition-key') ?? config.keySchema?.partitionKey ?? env('IDEMPOTENCY_PARTITION_KEY');
  const sortKey = text('sort-key') ?? config.keySchema?.sortKey ?? env('IDEMPOTENCY_SORT_KEY');
  const keyPrefix = text('key-prefix') ?? config.keyPrefix ?? env('IDEMPOTENCY_KEY_PREFIX');
  const inFlightIndex =
    values['no-in-flight-index'] === true ? false : (text('in-flight-index') ?? config.inFlightIndex);
  const layout: TableLayoutOptions = {
    ...(partitionKey || sortKey
      ? { keySchema: { partitionKey: partitionKey ?? 'pk', ...(sortKey ? { sortKey } : {}) } }
      : {}),
    ...(config.attributeNames ? { attributeNames: config.attributeNames } : {}),
    ...(keyPrefix ? { keyPrefix } : {}),
    ...(inFlightIndex === undefined ? {} : { inFlightIndex }),
  };
  try {
    TableLayout.from(layout, '--config');
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const endpoint = text('endpoint') ?? process.env.DYNAMODB_ENDPOINT;
  const local = isLocalEndpoint(endpoint);
  const client = new DynamoDBClient({
    endpoint,
    region: text('region') ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
    ...(local && !process.env.AWS_ACCESS_KEY_ID
      ? { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
      : {}),
  });
  const keys = process.env.IDEMPOTENCY_ENCRYPTION_KEYS?.split(',').filter(Boolean);
  const encryption = config.encryption ?? (keys?.length ? { keys } : undefined);
  const json = values.json === true;
  return {
    values,
    positionals: parsed.positionals,
    tableName,
    layout,
    encryption,
    config,
    client,
    endpoint,
    local,
    where: `${tableName} at ${endpoint ?? 'AWS'}`,
    json,
    out,
    print: (value, lines) => (json ? out.log(JSON.stringify(value, null, 2)) : lines.forEach((line) => out.log(line))),
  };
}

/** The sealer for the configured encryption keys, if any. */
export function sealerOf(context: CliContext): ResponseSealer | undefined {
  return ResponseSealer.from(context.encryption, 'encryption');
}

/** The module's options a command may need, as JSON: the table and its layout, encryption keys, the lease settings. */
export interface ConfigFile
  extends
    TableLayoutOptions,
    Pick<IdempotencyModuleOptions, 'pendingTtlSeconds' | 'clockSkewSeconds' | 'failedTtlSeconds'> {
  tableName?: string;
  encryption?: EncryptionOptions;
  /** With a sort key: the app's `partitionKeyValue` when it is a fixed string (the partition of every record). */
  partitionKeyValue?: string;
}

function readConfig(path: string): ConfigFile {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as ConfigFile;
  } catch (error) {
    throw new UsageError(`--config ${path}: ${(error as Error).message}`);
  }
}

/** `90s`, `15m`, `2h`, `1d`, or a number of seconds. */
export function durationSeconds(text: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)([smhd]?)$/.exec(text.trim());
  if (!match) throw new UsageError(`${flag} takes a duration such as 90s, 15m, 2h or 1d, got ${text}`);
  return Number(match[1]) * { '': 1, s: 1, m: 60, h: 3600, d: 86_400 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
}

/** Nest's logs (the reconciler's warnings, a step surgery's record) as JSON lines on stderr: stdout is the result's. */
export class StderrLogger implements LoggerService {
  log = (message: unknown) => this.write('log', message);
  warn = (message: unknown) => this.write('warn', message);
  error = (message: unknown) => this.write('error', message);

  private write(level: string, message: unknown) {
    const fields = typeof message === 'object' && message !== null ? message : { msg: message };
    process.stderr.write(`${JSON.stringify({ level, ...fields })}\n`);
  }
}
