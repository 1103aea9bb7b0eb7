import { DynamoDbLocal, dynamoDbLocalUnavailable, startDynamoDbLocal } from './dynamodb-local';

/**
 * One DynamoDB Local for the whole run (each test uses its own tables), when java 17+ is on PATH. Its endpoint
 * reaches the test workers as DYNAMODB_LOCAL_ENDPOINT. Without java the DynamoDB Local suites are skipped with one
 * line saying why; with REQUIRE_DYNAMODB_LOCAL=1 (CI) that is a failure instead.
 */
export default async function globalSetup(): Promise<void> {
  // The SDK's notice about its future Node.js 22 requirement is for operators, not test output: off in this process
  // (whose DynamoDB Local check makes the first client) and in the workers and processes it starts.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  // One given from outside (npm run test:mutation starts one for all its Jest runs) is used as it is.
  if (process.env.DYNAMODB_LOCAL_ENDPOINT) return;
  const unavailable = dynamoDbLocalUnavailable();
  if (unavailable) {
    if (process.env.REQUIRE_DYNAMODB_LOCAL === '1') {
      throw new Error(
        `REQUIRE_DYNAMODB_LOCAL=1 but DynamoDB Local cannot run: ${unavailable}. Install Java 17+ (openjdk-17-jre-headless).`,
      );
    }
    console.log(`\nDynamoDB Local suites SKIPPED: ${unavailable}. Install Java 17+ to run them.`);
    return;
  }
  const server = await startDynamoDbLocal();
  process.env.DYNAMODB_LOCAL_ENDPOINT = server.endpoint;
  (globalThis as { dynamoDbLocal?: DynamoDbLocal }).dynamoDbLocal = server;
}
