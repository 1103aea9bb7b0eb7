const { DynamoDBClient, PutItemCommand, UpdateItemCommand } = require('@aws-sdk/client-dynamodb');
const { DynamoDBDocumentClient, PutCommand, UpdateCommand } = require('@aws-sdk/lib-dynamodb');
const { HttpResponse } = require('@smithy/core/transport');
const { Readable } = require('node:stream');
const { randomUUID } = require('node:crypto');
const { DynamoDbIdempotencyRepository } = require('../libs/idempotency/dist/index.js');
const requestHandler = { handle: async () => ({ response: new HttpResponse({ statusCode: 200, headers: { 'content-type': 'application/x-amz-json-1.0' }, body: Readable.from([Buffer.from('{}')]) }) }), updateHttpClientConfig() {}, httpHandlerConfigs: () => ({}) };
const client = new DynamoDBClient({ region: 'eu-west-1', endpoint: 'http://127.0.0.1:1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, requestHandler });
const docs = DynamoDBDocumentClient.from(client);
const repo = new DynamoDbIdempotencyRepository({ client, tableName: 't' });
const T = 't';
const response = { statusCode: 200, headers: {}, body: { ok: true, received: { item: 'book', quantity: 1 } } };
const variants = {
  async floor(i) {
    const pk = `POST /bench/floor#k${i}`; const now = Math.floor(Date.now() / 1000); const claimToken = randomUUID();
    await docs.send(new PutCommand({ TableName: T, Item: { pk, status: 'PENDING', expires_at: now + 60, claim_token: claimToken, fingerprint: '-', pending_since: now }, ConditionExpression: 'attribute_not_exists(pk) OR expires_at < :now', ExpressionAttributeValues: { ':now': now } }));
    await docs.send(new UpdateCommand({ TableName: T, Key: { pk }, UpdateExpression: 'SET #s = :completed, #r = :response, expires_at = :expiresAt, completed_at = :now', ConditionExpression: '#s = :pending AND claim_token = :token', ExpressionAttributeNames: { '#s': 'status', '#r': 'response' }, ExpressionAttributeValues: { ':completed': 'COMPLETED', ':pending': 'PENDING', ':token': claimToken, ':response': JSON.stringify(response), ':expiresAt': now + 86400, ':now': now } }));
  },
  async low(i) {
    const pk = `POST /bench/floor#k${i}`; const now = String(Math.floor(Date.now() / 1000)); const claimToken = randomUUID();
    await client.send(new PutItemCommand({ TableName: T, Item: { pk: { S: pk }, status: { S: 'PENDING' }, expires_at: { N: now }, claim_token: { S: claimToken }, fingerprint: { S: '-' }, pending_since: { N: now } }, ConditionExpression: 'attribute_not_exists(pk) OR expires_at < :now', ExpressionAttributeValues: { ':now': { N: now } } }));
    await client.send(new UpdateItemCommand({ TableName: T, Key: { pk: { S: pk } }, UpdateExpression: 'SET #s = :completed, #r = :response, expires_at = :expiresAt, completed_at = :now', ConditionExpression: '#s = :pending AND claim_token = :token', ExpressionAttributeNames: { '#s': 'status', '#r': 'response' }, ExpressionAttributeValues: { ':completed': { S: 'COMPLETED' }, ':pending': { S: 'PENDING' }, ':token': { S: claimToken }, ':response': { S: JSON.stringify(response) }, ':expiresAt': { N: now }, ':now': { N: now } } }));
  },
  async module(i) {
    const key = `POST /bench/idempotent#k${i}`;
    const { claimToken } = await repo.claim({ key, fingerprint: 'a'.repeat(64), leaseSeconds: 60 });
    await repo.complete({ key, claimToken, response, ttlSeconds: 86400 });
  },
};
(async () => {
  const N = Number(process.env.N ?? 5000);
  for (let round = 0; round < 8; round++) for (const [name, fn] of Object.entries(variants)) {
    const c0 = process.cpuUsage(); 
    for (let i = 0; i < N; i++) await fn(i);
    const c = process.cpuUsage(c0);
    if (round > 0) console.log(round, name.padEnd(8), ((c.user + c.system) / N).toFixed(1), 'µs/iter');
  }
})();
