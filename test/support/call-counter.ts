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
