/**
 * DynamoDB capacity units per first request and per uncached replay, for responses of 0.2, 2, 20 and 200 KB: the
 * module in lease and optimistic mode, and Powertools' idempotency, on AWS's DynamoDB Local (which reports
 * `ConsumedCapacity`, the table's and each index's); and what a lease renewal costs the index of keys in flight. A refused conditional write is billed too but its error carries no `ConsumedCapacity`: it is
 * computed from DynamoDB's item-size rules (said so in the table). Prints JSON (`--json`) or Markdown.
 *
 *   node test/support/run-ts.cjs bench/capacity.ts [--json]
 */
import { gzipSync } from 'node:zlib';
import { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Test } from '@nestjs/testing';
import { DynamoDbIdempotencyRepository, IdempotencyModule, IdempotencyService } from 'nestjs-dynamodb-idempotency';
import { localClient } from '../test/support/dynalite';
import { startDynamoDbLocal } from '../test/support/dynamodb-local';
import { createIdempotencyTable, createTableWithKey } from '../test/support/table';

const SIZES_KB = [0.2, 2, 20, 200];

/**
 * Capacity used by the calls a client sends: reported, or computed for a refused conditional write. `write` and `read`
 * are the table's; `index` the write units of the table's index of keys in flight (the module's table has it, as
 * `table:create` makes it; Powertools' has none).
 */
interface Units {
  write: number;
  read: number;
  computed: number;
  index: number;
}

/** DynamoDB's size of an item: attribute names and values (strings and binaries by bytes, numbers about 1 per 2 digits). */
function itemBytes(item: Record<string, AttributeValue> | undefined): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item ?? {})) {
    bytes += Buffer.byteLength(name);
    if (value.S !== undefined) bytes += Buffer.byteLength(value.S);
    else if (value.N !== undefined) bytes += Math.ceil(value.N.replace(/^-|\./g, '').length / 2) + 1;
    else if (value.B !== undefined) bytes += value.B.byteLength;
    else bytes += Buffer.byteLength(JSON.stringify(value));
  }
  return bytes;
}

/** One entry of `ConsumedCapacity` with `ReturnConsumedCapacity: INDEXES`: the total, the table's and each index's. */
interface Consumed {
  CapacityUnits?: number;
  Table?: { CapacityUnits?: number };
  GlobalSecondaryIndexes?: Record<string, { CapacityUnits?: number }>;
}

/** Counts the capacity units of every call of `client` into `units`. */
function meter(client: DynamoDBClient, units: Units): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as Record<string, unknown>;
      input.ReturnConsumedCapacity = 'INDEXES';
      const operation = String(context.commandName);
      try {
        const result = await next(args);
        const consumed = (result.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
        for (const entry of ([] as Consumed[]).concat((consumed as never) ?? [])) {
          const table = entry.Table?.CapacityUnits ?? entry.CapacityUnits ?? 0;
          if (/Get|Query|Scan/.test(operation)) units.read += table;
          else units.write += table;
          for (const index of Object.values(entry.GlobalSecondaryIndexes ?? {}))
            units.index += index.CapacityUnits ?? 0;
        }
        return result;
      } catch (error) {
        // A refused condition is billed like the write, on the larger of the item before and after (1 unit per KB).
        if ((error as Error).name === 'ConditionalCheckFailedException') {
          const before = itemBytes((error as { Item?: Record<string, AttributeValue> }).Item);
          const after = itemBytes(input.Item as Record<string, AttributeValue> | undefined);
          const computed = Math.max(1, Math.ceil(Math.max(before, after) / 1024));
          units.write += computed;
          units.computed += computed;
        }
        throw error;
      }
    },
    { step: 'initialize', name: 'meterCapacity' },
  );
}

/** A JSON response of about `kb` KB: a list of order lines, as compressible as typical API JSON. */
function responseOf(kb: number) {
  const lines = [];
  for (let i = 0; JSON.stringify(lines).length < kb * 1024; i++) {
    lines.push({ id: `line-${i}`, sku: `SKU-${(i * 7919) % 100_000}`, quantity: (i % 5) + 1, price: (i * 37) % 1000 });
  }
  return { orderId: 'o-1', lines };
}

type Mode = 'lease' | 'optimistic' | 'powertools';
interface Measured {
  mode: Mode;
  kb: number;
  first: Units;
  replay: Units;
}

async function main(): Promise<void> {
  const local = await startDynamoDbLocal();
  const units: Units = { write: 0, read: 0, computed: 0, index: 0 };
  const client = localClient(local.endpoint);
  meter(client, units);
  const tableName = 'capacity_idempotency';
  await createIdempotencyTable(localClient(local.endpoint), tableName);
  await createTableWithKey(localClient(local.endpoint), 'capacity_powertools');
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false } })],
  }).compile();
  const service = (await moduleRef.init()).get(IdempotencyService);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { makeIdempotent, IdempotencyConfig } = require('@aws-lambda-powertools/idempotency');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { DynamoDBPersistenceLayer } = require('@aws-lambda-powertools/idempotency/dynamodb');
  const powertoolsConfig = new IdempotencyConfig({ eventKeyJmesPath: 'key' });
  powertoolsConfig.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 });

  const measured: Measured[] = [];
  const cost = async (call: () => Promise<unknown>): Promise<Units> => {
    Object.assign(units, { write: 0, read: 0, computed: 0, index: 0 });
    await call();
    return { ...units };
  };
  for (const kb of SIZES_KB) {
    const response = responseOf(kb);
    for (const mode of ['lease', 'optimistic'] as const) {
      const run = () => service.execute({ operation: 'capacity', key: `${mode}-${kb}`, mode }, async () => response);
      measured.push({ mode, kb, first: await cost(run), replay: await cost(run) });
    }
    const powertools = makeIdempotent(async () => response, {
      persistenceStore: new DynamoDBPersistenceLayer({ tableName: 'capacity_powertools', awsSdkV3Client: client }),
      config: powertoolsConfig,
    });
    const run = () => powertools({ key: `powertools-${kb}` });
    measured.push({ mode: 'powertools', kb, first: await cost(run), replay: await cost(run) });
  }
  // A lease renewal (the heartbeat of a long handler) moves the record's sort key in the index: a delete and a put there.
  const repository = new DynamoDbIdempotencyRepository({ client, tableName });
  const claim = await repository.claim({ key: 'renewed', fingerprint: 'f', leaseSeconds: 60 });
  if (!claim.claimed) throw new Error('the renewal measurement could not claim its key');
  const renewal = await cost(() =>
    repository.renew({ key: 'renewed', claimToken: claim.claimToken, leaseSeconds: 120 }),
  );
  await moduleRef.close();
  client.destroy();
  await local.stop();

  const thresholds = [0.25, 0.5, 0.75, 1, 1.5, 2, 4, 8, 16].map((kb) => {
    const json = JSON.stringify({
      statusCode: 200,
      headers: { 'content-type': 'application/json' },
      body: responseOf(kb),
    });
    const plain = Buffer.byteLength(json);
    return { kb, plain, gzipped: gzipSync(json).byteLength };
  });
  if (process.argv.includes('--json')) process.stdout.write(JSON.stringify({ measured, renewal, thresholds }));
  else process.stdout.write(`${JSON.stringify({ measured, thresholds }, null, 2)}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
