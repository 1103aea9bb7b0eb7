import { DynamoDBClient, UpdateItemCommand, UpdateItemCommandInput } from '@aws-sdk/client-dynamodb';

/**
 * The floor's two DynamoDB calls, by hand: exactly the requests the module sends for a new key on the default layout
 * (`pk` alone) and nothing else, so that the floor is the floor for the module's calls. A test holds them equal to the
 * module's own (test/http/floor-requests.spec.ts). Used by `/bench/floor`, and by `bench/repository-calls.cjs` and
 * `bench/module-cpu.ts` (which measure the SDK side alone).
 */
const CLAIM_UPDATE =
  'SET #status = :pending, #expires = :expiresAt, #token = :token, #fingerprint = :fingerprint, #pending = :now, #holder = :holder, #inflight = :shard, #steps = if_not_exists(#steps, :noSteps), #owners = list_append(if_not_exists(#owners, :noOwners), :owner) REMOVE #response, #completed, #renewed ADD #runs :one';
const CLAIM_CONDITION =
  'attribute_not_exists(#pk) OR (#fingerprint = :fingerprint AND ((#status = :failed AND (attribute_not_exists(#response) OR #expires < :now)) OR (#status = :pending AND #expires < :leaseCutoff)))';
const COMPLETE_UPDATE =
  'SET #status = :completed, #response = :response, #expires = :expiresAt, #completed = :now REMOVE #inflight';
const OWNED = '#status = :pending AND #token = :token';

/** The record's shard of the index of keys in flight, as the module picks it: a hash's last hex digit, or a sum. */
function shardOf(pk: string): number {
  const digit = parseInt(pk.slice(-1), 16);
  return Number.isNaN(digit) ? [...pk].reduce((sum, char) => sum + char.charCodeAt(0), 0) % 16 : digit;
}

export const floorRequests = {
  /** The claim: an `UpdateItem` that wins a new key (or resumes the same request) and returns the old item. */
  claim(tableName: string, pk: string, claimToken: string, now: number, holder: string): UpdateItemCommandInput {
    return {
      TableName: tableName,
      Key: { pk: { S: pk } },
      UpdateExpression: CLAIM_UPDATE,
      ConditionExpression: CLAIM_CONDITION,
      ExpressionAttributeNames: {
        '#status': 'status',
        '#expires': 'expires_at',
        '#token': 'claim_token',
        '#fingerprint': 'fingerprint',
        '#pending': 'pending_since',
        '#holder': 'holder',
        '#inflight': 'in_flight',
        '#steps': 'steps',
        '#owners': 'owners',
        '#response': 'response',
        '#completed': 'completed_at',
        '#renewed': 'renewed_at',
        '#runs': 'runs',
        '#pk': 'pk',
      },
      ExpressionAttributeValues: {
        ':pending': { S: 'PENDING' },
        ':failed': { S: 'FAILED' },
        ':expiresAt': { N: String(now + 60) },
        ':token': { S: claimToken },
        ':fingerprint': { S: '-' },
        ':now': { N: String(now) },
        ':leaseCutoff': { N: String(now) },
        ':noSteps': { M: {} },
        ':one': { N: '1' },
        ':holder': { S: holder },
        ':shard': { S: `in-flight#${shardOf(pk).toString(16)}` },
        ':owner': { L: [{ S: holder }] },
        ':noOwners': { L: [] },
      },
      ReturnValues: 'ALL_OLD',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    };
  },

  /** The completion: a guarded `UpdateItem` PENDING → COMPLETED with the response as JSON text. */
  complete(tableName: string, pk: string, claimToken: string, now: number, body: unknown): UpdateItemCommandInput {
    return {
      TableName: tableName,
      Key: { pk: { S: pk } },
      UpdateExpression: COMPLETE_UPDATE,
      ConditionExpression: OWNED,
      ExpressionAttributeNames: {
        '#status': 'status',
        '#response': 'response',
        '#expires': 'expires_at',
        '#completed': 'completed_at',
        '#inflight': 'in_flight',
        '#token': 'claim_token',
      },
      ExpressionAttributeValues: {
        ':expiresAt': { N: String(now + 86_400) },
        ':pending': { S: 'PENDING' },
        ':token': { S: claimToken },
        ':completed': { S: 'COMPLETED' },
        ':response': { S: JSON.stringify({ statusCode: 200, headers: {}, body }) },
        ':now': { N: String(now) },
      },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    };
  },
};

export const floorCalls = {
  claim(client: DynamoDBClient, tableName: string, pk: string, claimToken: string, now: number, holder = '-') {
    return client.send(new UpdateItemCommand(floorRequests.claim(tableName, pk, claimToken, now, holder)));
  },
  complete(client: DynamoDBClient, tableName: string, pk: string, claimToken: string, now: number, body: unknown) {
    return client.send(new UpdateItemCommand(floorRequests.complete(tableName, pk, claimToken, now, body)));
  },
};
