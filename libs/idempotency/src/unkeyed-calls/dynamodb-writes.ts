import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { runningClaim } from '../protocol/idempotency-context';
import { judgedBy } from './unkeyed-call-watch';

/** The middleware's name on a client's stack: added once, whoever asks again. */
const MIDDLEWARE_NAME = 'nestjsDynamodbIdempotencyUnkeyedWrites';

/** The operations a re-run repeats unless a condition stops it, by the command names the SDK gives them. */
const WRITES: Record<string, string> = {
  PutItemCommand: 'PutItem',
  UpdateItemCommand: 'UpdateItem',
  DeleteItemCommand: 'DeleteItem',
};

type Write = { TableName?: string; ConditionExpression?: string };

/**
 * The tables a command writes without a condition, or none: a single write without a `ConditionExpression`, every
 * table of a `BatchWriteItem` (which takes no conditions), a transaction's `Put`, `Update` or `Delete` without one, and
 * PartiQL statements (`ExecuteStatement`, `BatchExecuteStatement`, `ExecuteTransaction`) reported as a `PutItem` is:
 * an `INSERT` (a re-run inserts again under a new key, or fails on its own first insert and never completes), and an
 * `UPDATE` or `DELETE` whose `WHERE` is one equality (the key alone).
 */
function unconditionalTargets(commandName: string, input: unknown): { operation: string; tables: string[] } {
  const none = { operation: '', tables: [] };
  const single = WRITES[commandName];
  if (single) {
    const write = input as Write;
    return write.ConditionExpression ? none : { operation: single, tables: [String(write.TableName)] };
  }
  if (commandName === 'BatchWriteItemCommand') {
    return {
      operation: 'BatchWriteItem',
      tables: Object.keys((input as { RequestItems?: object }).RequestItems ?? {}),
    };
  }
  if (commandName === 'TransactWriteItemsCommand') {
    const items = (input as { TransactItems?: Record<string, Write | undefined>[] }).TransactItems ?? [];
    const tables = items.flatMap((item) =>
      ['Put', 'Update', 'Delete'].flatMap((action) => {
        const write = item[action];
        return write && !write.ConditionExpression ? [String(write.TableName)] : [];
      }),
    );
    return { operation: 'TransactWriteItems', tables };
  }
  const statements = partiqlStatements(commandName, input);
  if (!statements) return none;
  return { operation: commandName.replace(/Command$/, ''), tables: statements.flatMap(unconditionalStatement) };
}

/** The statements of a PartiQL command (`ExecuteStatement`, `BatchExecuteStatement`, `ExecuteTransaction`). */
function partiqlStatements(commandName: string, input: unknown): string[] | undefined {
  if (commandName === 'ExecuteStatementCommand') return [String((input as { Statement?: string }).Statement ?? '')];
  const many =
    commandName === 'BatchExecuteStatementCommand'
      ? (input as { Statements?: { Statement?: string }[] }).Statements
      : commandName === 'ExecuteTransactionCommand'
        ? (input as { TransactStatements?: { Statement?: string }[] }).TransactStatements
        : undefined;
  return many?.map(({ Statement }) => String(Statement ?? ''));
}

const PARTIQL_WRITE = /^\s*(UPDATE|DELETE\s+FROM|INSERT\s+INTO)\s+("[^"]+"|\S+)(.*)$/is;

/** The table of an `INSERT`, or of an `UPDATE` or `DELETE` whose `WHERE` is one equality (no `AND`, no function). */
function unconditionalStatement(statement: string): string[] {
  const write = PARTIQL_WRITE.exec(statement);
  if (!write) return [];
  if (/^INSERT/i.test(write[1])) return [write[2].replace(/^"|"$/g, '')];
  const where = /\bWHERE\b(.*)$/is.exec(write[3])?.[1] ?? '';
  const conditioned = /\b(AND|OR|attribute_\w+|begins_with|contains|size|IN|BETWEEN)\b|<|>/i.test(
    where.replace(/'[^']*'/g, ''),
  );
  return conditioned ? [] : [write[2].replace(/^"|"$/g, '')];
}

/** The part of the SDK's middleware types this uses (an initialize-step middleware, run before serialization). */
type Handler = (args: { input: unknown }) => Promise<unknown>;
type Middleware = (next: Handler, context: { commandName?: string }) => Handler;
interface Stack {
  add(middleware: Middleware, options: { step: 'initialize'; name: string; override: boolean }): void;
}

const unkeyedWrites: Middleware = (next, context) => (args) => {
  const claim = runningClaim();
  if (!claim?.watch) return next(args);
  let error;
  try {
    const { operation, tables } = unconditionalTargets(context.commandName ?? '', args.input);
    for (const table of new Set(tables)) {
      error ??= judgedBy(claim, () => ({ kind: 'dynamodb', operation, target: table }));
    }
  } catch {
    error = undefined; // a command this cannot read is never stopped for it
  }
  return error ? Promise.reject(error) : next(args);
};

/**
 * Watches a DynamoDB client (plain or document) for writes a protected call sends without a condition: a `PutItem`,
 * `UpdateItem` or `DeleteItem` without a `ConditionExpression` would be written again by a re-run after a crash or a
 * lost lease. Reported as the module's `unkeyedCalls` option says (a warning once per route and table, or with
 * `'error'` the write fails before it is sent). Calls outside protected calls, conditional writes and writes given
 * to `IdempotencyContext.commitWith()` (sent with the completion, not by the handler) are never reported. The module
 * watches its own client; call this for the application's other clients. Adding it twice changes nothing.
 *
 * @example
 * ```ts
 * const orders = DynamoDBDocumentClient.from(new DynamoDBClient({}));
 * watchUnkeyedWrites(orders);
 * ```
 */
export function watchUnkeyedWrites(client: DynamoDBClient | DynamoDBDocumentClient): void {
  (client.middlewareStack as unknown as Stack).add(unkeyedWrites, {
    step: 'initialize',
    name: MIDDLEWARE_NAME,
    override: true,
  });
}
