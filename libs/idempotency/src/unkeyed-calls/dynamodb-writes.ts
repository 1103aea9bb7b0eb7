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

/** The part of the SDK's middleware types this uses (an initialize-step middleware, run before serialization). */
type Handler = (args: { input: unknown }) => Promise<unknown>;
type Middleware = (next: Handler, context: { commandName?: string }) => Handler;
interface Stack {
  add(middleware: Middleware, options: { step: 'initialize'; name: string; override: boolean }): void;
}

const unkeyedWrites: Middleware = (next, context) => (args) => {
  const operation = WRITES[context.commandName ?? ''];
  const input = args.input as { TableName?: string; ConditionExpression?: string };
  const error =
    operation && !input.ConditionExpression
      ? judgedBy(runningClaim(), () => ({ kind: 'dynamodb', operation, target: String(input.TableName) }))
      : undefined;
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
