import { ensureIdempotencyTable } from '../dynamodb/idempotency-table';
import { checkIdempotencyTable } from '../dynamodb/table-checks';
import { CliCommand, CliContext } from './cli-context';

export const TABLE_COMMANDS = {
  'table:create': {
    summary:
      "create the table (the layout's keys, strings; PAY_PER_REQUEST) if missing, and enable TTL on the expiry attribute",
    usage: 'table:create [flags]',
    flags: {},
    run: tableCreate,
  },
  'table:check': {
    summary:
      "the deploy-time check: exit 1 unless the key schema is the layout's and TTL is ENABLED on the expiry attribute",
    usage: 'table:check [flags]',
    flags: {},
    run: tableCheck,
  },
} satisfies Record<string, CliCommand>;

async function tableCreate(context: CliContext): Promise<number> {
  const lines: string[] = [];
  await ensureIdempotencyTable(
    context.client,
    { tableName: context.tableName, ...context.layout },
    { log: (line: string) => lines.push(line), warn: (line: string) => context.out.error(line) },
  );
  context.print({ ready: true, table: context.tableName }, [...lines, `ready: ${context.where}`]);
  return 0;
}

async function tableCheck(context: CliContext): Promise<number> {
  const check = await checkIdempotencyTable(context.client, { tableName: context.tableName, ...context.layout });
  context.print(check, [...check.findings, check.ok ? `PASS: ${context.where}` : `FAIL: ${context.where}`]);
  return check.ok ? 0 : 1;
}
