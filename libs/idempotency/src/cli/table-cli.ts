import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DEFAULT_TABLE_NAME } from '../idempotency.constants';
import { ensureIdempotencyTable } from '../dynamodb/idempotency-table';
import { checkIdempotencyTable } from '../dynamodb/table-checks';

const USAGE = `Usage: nestjs-dynamodb-idempotency <table:create|table:check> [--table NAME] [--endpoint URL] [--region REGION]

  table:create  create the table (pk S hash key, PAY_PER_REQUEST) if missing and enable TTL on expires_at
  table:check   exit 1 unless the key schema is pk (S, HASH) and TTL is ENABLED on expires_at

Defaults come from IDEMPOTENCY_TABLE (idempotency_keys), DYNAMODB_ENDPOINT (AWS's own) and AWS_REGION.`;

/** Where the CLI writes; the console by default, a buffer in tests. */
export interface CliOutput {
  log(line: string): void;
  error(line: string): void;
}

/** The table tooling: creating the table, and the deploy-time check. Returns the exit code. */
export async function runTableCli(argv: string[], out: CliOutput = console): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      table: { type: 'string' },
      endpoint: { type: 'string' },
      region: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  const [command] = positionals;
  if (values.help || (command !== 'table:create' && command !== 'table:check')) {
    out.error(USAGE);
    return values.help ? 0 : 2;
  }
  const tableName = values.table ?? process.env.IDEMPOTENCY_TABLE ?? DEFAULT_TABLE_NAME;
  const endpoint = values.endpoint ?? process.env.DYNAMODB_ENDPOINT;
  const local = endpoint !== undefined && /^https?:\/\/(localhost|127\.|\[::1\])/.test(endpoint);
  const client = new DynamoDBClient({
    endpoint,
    region: values.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
    ...(local && !process.env.AWS_ACCESS_KEY_ID
      ? { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
      : {}),
  });
  const where = `${tableName} at ${endpoint ?? 'AWS'}`;
  try {
    if (command === 'table:create') {
      await ensureIdempotencyTable(client, tableName, {
        log: (line: string) => out.log(line),
        warn: (line: string) => out.error(line),
      });
      out.log(`ready: ${where}`);
      return 0;
    }
    const check = await checkIdempotencyTable(client, tableName);
    for (const line of check.findings) out.log(line);
    out.log(check.ok ? `PASS: ${where}` : `FAIL: ${where}`);
    return check.ok ? 0 : 1;
  } finally {
    client.destroy();
  }
}
