const http = require('node:http');
const { DynamoDBClient } = require('@aws-sdk/client-dynamodb');
const { DynamoDBDocumentClient, PutCommand } = require('@aws-sdk/lib-dynamodb');
const { DynamoDbIdempotencyRepository } = require('../libs/idempotency/dist/index.js');
const server = http.createServer((req, res) => { let b=''; req.on('data', d => b += d); req.on('end', () => { console.log(req.headers['x-amz-target'], req.headers['user-agent'], req.headers['x-amz-user-agent'], b.length); res.setHeader('content-type','application/x-amz-json-1.0'); res.end('{}'); }); });
server.listen(0, async () => {
  const client = new DynamoDBClient({ region: 'eu-west-1', endpoint: `http://127.0.0.1:${server.address().port}`, credentials: { accessKeyId: 'a', secretAccessKey: 'b' } });
  const repo = new DynamoDbIdempotencyRepository({ client, tableName: 't' });
  await repo.claim({ key: 'POST /x#k', fingerprint: 'f'.repeat(64), leaseSeconds: 60 });
  await repo.complete({ key: 'POST /x#k', claimToken: 'tok', response: { statusCode: 200, headers: {}, body: { ok: true } }, ttlSeconds: 86400 });
  const docs = DynamoDBDocumentClient.from(client);
  await docs.send(new PutCommand({ TableName: 't', Item: { pk: 'x' } }));
  server.close();
});
