import { setTimeout as sleep } from 'node:timers/promises';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { dynamoErrorCode } from '../dynamodb/dynamodb-errors';
import { ensureIdempotencyTable } from '../dynamodb/idempotency-table';
import { checkIdempotencyTable } from '../dynamodb/table-checks';
import { CliCommand, CliContext } from './cli-context';

export const TABLE_COMMANDS = {
  'table:create': {
    summary:
      "create the table (the layout's keys, strings; PAY_PER_REQUEST; the index of keys in flight unless --no-in-flight-index) if missing, and enable TTL on the expiry attribute",
    usage: 'table:create [flags]',
    flags: {},
    run: tableCreate,
  },
  'table:check': {
    summary:
      "the deploy-time check: exit 1 unless the key schema is the layout's and TTL is ENABLED on the expiry attribute; reports the index of keys in flight (and the command that adds it)",
    usage: 'table:check [flags]',
    flags: {},
    run: tableCheck,
  },
} satisfies Record<string, CliCommand>;

/** How long a table command waits for a local endpoint that refuses connections (DynamoDB Local takes ~8 s to listen). */
export const LOCAL_START_WAIT_SECONDS = 30;

/**
 * Waits while a local endpoint still refuses connections (one started with the command, as in a compose file or a
 * `predev` script), for at most `LOCAL_START_WAIT_SECONDS`, probing it with `ListTables`. AWS's own endpoints are not
 * waited for: a refusal there is a network problem, reported by the command at once.
 */
async function untilListening(context: CliContext): Promise<void> {
  if (!context.local) return;
  const deadline = Date.now() + LOCAL_START_WAIT_SECONDS * 1000;
  for (let told = false; ; told = true) {
    try {
      await context.client.send(new ListTablesCommand({ Limit: 1 }));
      return;
    } catch (error) {
      if (!refused(error) || Date.now() >= deadline) return; // the command itself reports what is wrong
      if (!told) {
        context.out.error(
          `${context.endpoint} refuses connections: waiting up to ${LOCAL_START_WAIT_SECONDS} s for it to start listening`,
        );
      }
      await sleep(250);
    }
  }
}

/** A connection refused or reset before any answer: nothing listens there (yet). */
function refused(error: unknown): boolean {
  const code = dynamoErrorCode(error);
  return code === 'ECONNREFUSED' || code === 'ECONNRESET';
}

async function tableCreate(context: CliContext): Promise<number> {
  const lines: string[] = [];
  await untilListening(context);
  await ensureIdempotencyTable(
    context.client,
    { tableName: context.tableName, ...context.layout },
    { log: (line: string) => lines.push(line), warn: (line: string) => context.out.error(line) },
  );
  context.print({ ready: true, table: context.tableName }, [...lines, `ready: ${context.where}`]);
  return 0;
}

async function tableCheck(context: CliContext): Promise<number> {
  await untilListening(context);
  const check = await checkIdempotencyTable(context.client, { tableName: context.tableName, ...context.layout });
  context.print(check, [...check.findings, check.ok ? `PASS: ${context.where}` : `FAIL: ${context.where}`]);
  return check.ok ? 0 : 1;
}
