import { DynamoDbLocal } from './dynamodb-local';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { dynamoDbLocal?: DynamoDbLocal }).dynamoDbLocal?.stop();
}
