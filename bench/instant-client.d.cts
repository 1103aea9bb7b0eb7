import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** A DynamoDB client whose every call is answered `{}` at once: the SDK's own work, no network. */
export function instantClient(): DynamoDBClient;
