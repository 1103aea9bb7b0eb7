import { DynamoDBDocumentClient, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';

/**
 * The floor's two DynamoDB calls, by hand through the DocumentClient: what the module needs for a new key and nothing
 * else. Used by `/bench/floor` and by `bench/repository-calls.cjs` (which measures the SDK side alone).
 */
export const floorCalls = {
  /** A conditional PutItem of the module's item shape: fails (ConditionalCheckFailedException) if the key is live. */
  claim(documents: DynamoDBDocumentClient, tableName: string, pk: string, claimToken: string, now: number) {
    return documents.send(
      new PutCommand({
        TableName: tableName,
        Item: {
          pk,
          status: 'PENDING',
          expires_at: now + 60,
          claim_token: claimToken,
          fingerprint: '-',
          pending_since: now,
        },
        ConditionExpression: 'attribute_not_exists(pk) OR expires_at < :now',
        ExpressionAttributeValues: { ':now': now },
      }),
    );
  },

  /** A conditional UpdateItem PENDING → COMPLETED with the response as JSON. */
  complete(
    documents: DynamoDBDocumentClient,
    tableName: string,
    pk: string,
    claimToken: string,
    now: number,
    body: unknown,
  ) {
    return documents.send(
      new UpdateCommand({
        TableName: tableName,
        Key: { pk },
        UpdateExpression: 'SET #s = :completed, #r = :response, expires_at = :expiresAt, completed_at = :now',
        ConditionExpression: '#s = :pending AND claim_token = :token',
        ExpressionAttributeNames: { '#s': 'status', '#r': 'response' },
        ExpressionAttributeValues: {
          ':completed': 'COMPLETED',
          ':pending': 'PENDING',
          ':token': claimToken,
          ':response': JSON.stringify({ statusCode: 200, headers: {}, body }),
          ':expiresAt': now + 86_400,
          ':now': now,
        },
      }),
    );
  },
};
