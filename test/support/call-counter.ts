import { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** Counts the DynamoDB API calls a client sends (every attempt the SDK makes), by operation. */
export function countCalls(client: DynamoDBClient) {
  const counts: Record<string, number> = {};
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const operation = String(context.commandName ?? 'unknown').replace(/Command$/, '');
      counts[operation] = (counts[operation] ?? 0) + 1;
      return next(args);
    },
    { step: 'finalizeRequest', name: 'countDynamoCalls' },
  );
  return {
    counts,
    total: () => Object.values(counts).reduce((sum, n) => sum + n, 0),
    reset: () => Object.keys(counts).forEach((operation) => delete counts[operation]),
  };
}

let timers = 0;

/** When a client sends `operation` (every attempt, `performance.now()` in ms), until `stop()` returns the times. */
export function sendTimes(client: DynamoDBClient, operation: string) {
  const times: number[] = [];
  const name = `sendTimes${++timers}`;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === `${operation}Command`) times.push(performance.now());
      return next(args);
    },
    { step: 'finalizeRequest', name },
  );
  return {
    stop: () => {
      client.middlewareStack.remove(name);
      return times;
    },
  };
}

/**
 * Counts the items a client's reads returned, by operation (`Scan`, `Query`, `Query in_flight` for an index): what
 * DynamoDB read for them (a Scan or Query is billed by the items it reads).
 */
export function countItemsRead(client: DynamoDBClient) {
  const items: Record<string, number> = {};
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      const output = result.output as { Items?: unknown[]; ScannedCount?: number };
      if (Array.isArray(output?.Items)) {
        const index = (args.input as { IndexName?: string }).IndexName;
        const operation = `${String(context.commandName).replace(/Command$/, '')}${index ? ` ${index}` : ''}`;
        items[operation] = (items[operation] ?? 0) + (output.ScannedCount ?? output.Items.length);
      }
      return result;
    },
    { step: 'initialize', name: 'countItemsRead' },
  );
  return { items, reset: () => Object.keys(items).forEach((operation) => delete items[operation]) };
}
