// A plain Express app made idempotent with Powertools' makeIdempotent (@aws-lambda-powertools/idempotency) on an
// embedded dynalite (or --endpoint), for docs/comparison.md: the conformance kit run against the most used peer.
//
//   node test/conformance/powertools-server.mjs --port N [--endpoint URL --charges FILE --work-ms N]
//
// POST /charges {amount} charges once per Idempotency-Key (201); GET /charges?key=K lists the charges made under K.
// For the kill window, --endpoint (a DynamoDB the process does not own) and --charges (a file) outlive a restart, and
// the handler works --work-ms after its charge before it returns; the in-progress lock lasts 2 s.
// Powertools' errors are mapped to the draft's statuses as an app would map them: in progress 409 (Retry-After: 1),
// another payload 422, no key 400 (Powertools wraps that one: the cause's name is read too); any other error 500.
import { randomUUID } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import dynalite from 'dynalite';
import express from 'express';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    endpoint: { type: 'string' },
    charges: { type: 'string' },
    'work-ms': { type: 'string' },
  },
});
let endpoint = values.endpoint;
if (!endpoint) {
  const store = dynalite({ createTableMs: 0 });
  await new Promise((resolve) => store.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${store.address().port}`;
}
const client = new DynamoDBClient({
  endpoint,
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});
await client
  .send(
    new CreateTableCommand({
      TableName: 'powertools',
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  )
  .catch((error) => {
    if (error.name !== 'ResourceInUseException') throw error; // made before a restart
  });

const config = new IdempotencyConfig({
  eventKeyJmesPath: 'key',
  payloadValidationJmesPath: 'body',
  throwOnNoIdempotencyKey: true,
});
// Outside Lambda there is no deadline: a fixed one is the in-progress lock's length (60 s; 2 s for the kill window).
config.registerLambdaContext({ getRemainingTimeInMillis: () => (values.charges ? 2_000 : 60_000) });

const charges =
  values.charges && existsSync(values.charges)
    ? readFileSync(values.charges, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line))
    : [];
const charge = makeIdempotent(
  async ({ key, body }) => {
    if (body.fail === true) throw new Error('charge failed');
    const made = { chargeId: randomUUID(), amount: body.amount, key };
    charges.push(made);
    if (values.charges) appendFileSync(values.charges, `${JSON.stringify(made)}\n`);
    await sleep(Number(values['work-ms'] ?? 0)); // the handler's work after its charge
    return made;
  },
  { persistenceStore: new DynamoDBPersistenceLayer({ tableName: 'powertools', awsSdkV3Client: client }), config },
);

const STATUS = {
  IdempotencyAlreadyInProgressError: 409,
  IdempotencyValidationError: 422,
  IdempotencyKeyError: 400,
};

const app = express();
app.use(express.json({ limit: '1mb' }));
app.get('/health', (_request, response) => response.json({ ok: true }));
app.get('/charges', (request, response) => response.json(charges.filter((each) => each.key === request.query.key)));
app.post('/charges', async (request, response) => {
  try {
    response.status(201).json(await charge({ key: request.header('idempotency-key'), body: request.body }));
  } catch (error) {
    // A missing key surfaces as IdempotencyPersistenceLayerError, its cause the IdempotencyKeyError.
    const status = STATUS[error.name] ?? STATUS[error.cause?.name] ?? 500;
    if (status === 409) response.setHeader('retry-after', '1');
    response.status(status).json({ error: error.name, message: error.message });
  }
});
const server = app.listen(Number(values.port ?? 0), '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${server.address().port}\n`);
});
