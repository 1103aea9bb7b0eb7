// In-process: CPU per call of the module's interceptor (new key, cache on) on a DynamoDB client whose HTTP handler
// answers at once, vs the floor's two calls on the same client. No network, no Nest router: the module's own cost.
require('reflect-metadata');
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
const { Readable } = require('node:stream');
const { randomUUID } = require('node:crypto');
const { DynamoDBClient } = require('@aws-sdk/client-dynamodb');
const { DynamoDBDocumentClient, PutCommand, UpdateCommand } = require('@aws-sdk/lib-dynamodb');
const { HttpResponse } = require('@smithy/core/transport');
const { Controller, Post, Logger } = require('@nestjs/common');
const { Test } = require('@nestjs/testing');
const { ExecutionContextHost } = require('@nestjs/core/helpers/execution-context-host');
const { lastValueFrom, of } = require('rxjs');
const { IdempotencyModule, IdempotencyInterceptor, Idempotent, InMemoryIdempotencyRepository } = require('../libs/idempotency/dist/index.js');

const answer = () => ({ response: new HttpResponse({ statusCode: 200, headers: { 'content-type': 'application/x-amz-json-1.0' }, body: Readable.from([Buffer.from('{}')]) }) });
const requestHandler = { handle: async () => answer(), updateHttpClientConfig() {}, httpHandlerConfigs: () => ({}) };
const client = new DynamoDBClient({ region: 'eu-west-1', endpoint: 'http://127.0.0.1:1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, requestHandler });
const docs = DynamoDBDocumentClient.from(client);

class Bench { create(body) { return { ok: true, received: body }; } }
Controller('bench')(Bench);
for (const d of [Post('x'), Idempotent()]) d(Bench.prototype, 'create', Object.getOwnPropertyDescriptor(Bench.prototype, 'create'));

function fakeRes() {
  const headers = {};
  return { statusCode: 201, get: (n) => headers[n.toLowerCase()], getHeader: (n) => headers[n.toLowerCase()], set(n, v) { headers[n.toLowerCase()] = v; return this; }, setHeader(n, v) { headers[n.toLowerCase()] = v; }, status(c) { this.statusCode = c; return this; } };
}
async function moduleCall(interceptor, i) {
  const body = { item: 'book', quantity: 1 };
  const req = { method: 'POST', url: '/bench/x', headers: { 'content-type': 'application/json', 'idempotency-key': `k-${i}` }, params: {}, query: {}, body };
  const ctx = new ExecutionContextHost([req, fakeRes(), () => undefined], Bench, Bench.prototype.create);
  ctx.setType('http');
  return lastValueFrom(interceptor.intercept(ctx, { handle: () => of(Bench.prototype.create(body)) }));
}
async function floorCall(i) {
  const body = { item: 'book', quantity: 1 };
  const pk = `POST /bench/floor#k${i}`; const now = Math.floor(Date.now() / 1000); const claimToken = randomUUID();
  await docs.send(new PutCommand({ TableName: 't', Item: { pk, status: 'PENDING', expires_at: now + 60, claim_token: claimToken, fingerprint: '-', pending_since: now }, ConditionExpression: 'attribute_not_exists(pk) OR expires_at < :now', ExpressionAttributeValues: { ':now': now } }));
  const result = Bench.prototype.create(body);
  await docs.send(new UpdateCommand({ TableName: 't', Key: { pk }, UpdateExpression: 'SET #s = :completed, #r = :response, expires_at = :expiresAt, completed_at = :now', ConditionExpression: '#s = :pending AND claim_token = :token', ExpressionAttributeNames: { '#s': 'status', '#r': 'response' }, ExpressionAttributeValues: { ':completed': 'COMPLETED', ':pending': 'PENDING', ':token': claimToken, ':response': JSON.stringify({ statusCode: 200, headers: {}, body: result }), ':expiresAt': now + 86400, ':now': now } }));
  return result;
}
async function plainCall() { return lastValueFrom(of(Bench.prototype.create({ item: 'book', quantity: 1 }))); }

async function app(options) {
  const moduleRef = await Test.createTestingModule({ imports: [IdempotencyModule.forRoot({ tableName: 't', ...options })], controllers: [Bench] }).compile();
  moduleRef.useLogger(false);
  const nest = moduleRef.createNestApplication({ logger: false });
  await nest.init();
  return nest.get(IdempotencyInterceptor);
}

(async () => {
  Logger.overrideLogger(false);
  const dynamo = await app({ client, failOnStartup: false });
  const memory = await app({ repository: new InMemoryIdempotencyRepository() });
  const N = Number(process.env.N ?? 2000), R = Number(process.env.R ?? 9);
  let seq = 0;
  const variants = { floor: (i) => floorCall(i), dynamo: (i) => moduleCall(dynamo, i), plain: () => plainCall(), memory: (i) => moduleCall(memory, i) };
  if (process.env.ONLY) for (const k of Object.keys(variants)) if (k !== process.env.ONLY) delete variants[k];
  const results = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  for (let r = 0; r < R; r++) for (const [name, fn] of Object.entries(variants)) {
    const c0 = process.cpuUsage();
    for (let i = 0; i < N; i++) await fn(`${r}-${seq++}`);
    const c = process.cpuUsage(c0);
    if (r > 0) results[name].push((c.user + c.system) / N);
  }
  const stat = (a) => { const s = [...a].sort((x, y) => x - y); return `min ${s[0].toFixed(1)} median ${s[Math.floor(s.length / 2)].toFixed(1)}`; };
  for (const [name, values] of Object.entries(results)) console.log(name.padEnd(7), stat(values), 'µs/call');
  if (process.env.ONLY) return;
  const diff = (a, b) => results[a].map((v, i) => v - results[b][i]);
  console.log('dynamo - floor', stat(diff('dynamo', 'floor')));
  console.log('memory - plain', stat(diff('memory', 'plain')));
  process.exit(0);
})();
