import { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** DynamoDB API calls sent by this process (every SDK attempt), by operation: what `npm run bench` reports. */
export const dynamoCalls: Record<string, number> = {};

export function countDynamoCalls(client: DynamoDBClient): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const operation = String(context.commandName ?? 'unknown').replace(/Command$/, '');
      dynamoCalls[operation] = (dynamoCalls[operation] ?? 0) + 1;
      return next(args);
    },
    { step: 'finalizeRequest', name: 'benchCountDynamoCalls' },
  );
}
