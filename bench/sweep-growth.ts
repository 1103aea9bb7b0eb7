/**
 * What a sweep reads as the table grows, on AWS's DynamoDB Local (which reports `ConsumedCapacity`): a table of
 * 10,000, 100,000 and 1,000,000 finished records (COMPLETED, a 1 KB response, 24 hours to live; filled with
 * `BatchWriteItem`) plus 100 stuck PENDING ones, swept by `IdempotencyReconciler` with the index of keys in flight and
 * without it (`inFlightIndex: false`, the same table): the items DynamoDB read (`ScannedCount`), the read units, the
 * seconds, the stuck keys found. Writes bench/SWEEP.md (or prints it with `--print`); `--sizes 10000,100000` for fewer.
 *
 *   node test/support/run-ts.cjs bench/sweep-growth.ts [--print] [--sizes n,n,...]
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AttributeValue, BatchWriteItemCommand, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  DynamoDbIdempotencyRepository,
  IdempotencyClock,
  IdempotencyModule,
  IdempotencyReconciler,
  IdempotencyService,
  SweepResult,
} from 'nestjs-dynamodb-idempotency';
import { addInFlightIndexCommand } from '../libs/idempotency/src/dynamodb/in-flight-index';
import { TableLayout } from '../libs/idempotency/src/dynamodb/table-layout';
import { recordKey } from '../libs/idempotency/src/keys/record-key';
import { scanCostInWords } from '../libs/idempotency/src/observability/sweep-cost';
import { localClient } from '../test/support/dynalite';
import { startDynamoDbLocal } from '../test/support/dynamodb-local';
import { createIdempotencyTable } from '../test/support/table';

const SIZES = (/--sizes[= ](\S+)/.exec(process.argv.join(' '))?.[1] ?? '10000,100000,1000000').split(',').map(Number);
const STUCK = 100;
const TABLE = 'sweep_growth';
/** The reconciler's default pace: pages of 100 items, at most 5 a second. */
const DEFAULT_ITEMS_PER_SECOND = 500;

/** Items and read units DynamoDB reports for the reads a client sends. */
interface Reads {
  items: number;
  readUnits: number;
}

function meter(client: DynamoDBClient, reads: Reads): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (/Query|Scan/.test(String(context.commandName))) {
        const output = result.output as { ScannedCount?: number; ConsumedCapacity?: { CapacityUnits?: number } };
        reads.items += output.ScannedCount ?? 0;
        reads.readUnits += output.ConsumedCapacity?.CapacityUnits ?? 0;
      }
      return result;
    },
    { step: 'initialize', name: 'meterReads' },
  );
  client.middlewareStack.add(
    (next) => async (args) => {
      (args.input as Record<string, unknown>).ReturnConsumedCapacity = 'TOTAL';
      return next(args);
    },
    { step: 'initialize', name: 'askCapacity' },
  );
}

/** A clock an hour behind: its claims' leases ended long ago (the records of a crashed process). */
class HourAgo extends IdempotencyClock {
  nowMs(): number {
    return Date.now() - 3_600_000;
  }
}

/** One finished record as the module writes it (a 1 KB JSON response), to copy under other keys. */
async function finishedRecord(client: DynamoDBClient): Promise<Record<string, AttributeValue>> {
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ client, tableName: TABLE, replayCache: { enabled: false } })],
  }).compile();
  const service = moduleRef.get(IdempotencyService);
  const lines = Array.from({ length: 12 }, (_, i) => ({ id: `line-${i}`, sku: `SKU-${i * 7919}`, quantity: i % 5 }));
  await service.execute({ operation: 'POST /orders', key: 'template' }, async () => ({ orderId: 'o-1', lines }));
  const key = recordKey('fn POST /orders', undefined, 'template');
  const { Item } = await client.send(new GetItemCommand({ TableName: TABLE, Key: { pk: { S: key } } }));
  if (!Item) throw new Error('the template record was not written');
  return Item;
}

/** Adds finished records `from`..`to` (copies of `template` under their own keys), 25 to a batch, 16 batches at once. */
async function fill(client: DynamoDBClient, template: Record<string, AttributeValue>, from: number, to: number) {
  const batches: number[] = [];
  for (let start = from; start < to; start += 25) batches.push(start);
  const write = async (start: number) => {
    let items = Array.from({ length: Math.min(25, to - start) }, (_, i) => ({
      PutRequest: { Item: { ...template, pk: { S: `POST /orders#${sha(`finished-${start + i}`)}` } } },
    }));
    while (items.length) {
      const { UnprocessedItems } = await client.send(new BatchWriteItemCommand({ RequestItems: { [TABLE]: items } }));
      items = (UnprocessedItems?.[TABLE] ?? []) as typeof items;
    }
  };
  for (let next = 0; next < batches.length; next += 16) await Promise.all(batches.slice(next, next + 16).map(write));
}

function sha(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Leaves `STUCK` keys PENDING with leases that ended an hour ago, as a crashed process leaves them. */
async function strand(client: DynamoDBClient, round: string): Promise<void> {
  const repository = new DynamoDbIdempotencyRepository({ client, tableName: TABLE, clock: new HourAgo() });
  for (let i = 0; i < STUCK; i++) {
    const claim = await repository.claim({
      key: recordKey('POST /orders', undefined, `stuck-${round}-${i}`),
      fingerprint: 'f',
      leaseSeconds: 60,
    });
    if (!claim.claimed) throw new Error('a stuck key could not be claimed');
  }
}

interface Row {
  finished: number;
  indexed: boolean;
  reads: Reads;
  seconds: number;
  result: SweepResult;
  said: string[];
}

/** One sweep by a reconciler of its own (its first: it says what it reads), unpaced, with what it logged. */
async function sweep(endpoint: string, indexed: boolean, finished: number): Promise<Row> {
  const reads: Reads = { items: 0, readUnits: 0 };
  const metered = localClient(endpoint);
  meter(metered, reads);
  const moduleRef = await Test.createTestingModule({
    imports: [
      IdempotencyModule.forRoot({
        client: metered,
        tableName: TABLE,
        replayCache: { enabled: false },
        ...(indexed ? {} : { inFlightIndex: false }),
      }),
    ],
  }).compile();
  const said: string[] = [];
  const keep = (message: unknown) => said.push(typeof message === 'string' ? message : JSON.stringify(message));
  Logger.overrideLogger({ log: keep, warn: keep, error: keep });
  const started = performance.now();
  const result = await moduleRef.get(IdempotencyReconciler).sweep({ maxPagesPerSecond: 100_000 });
  const seconds = (performance.now() - started) / 1000;
  Logger.overrideLogger(false);
  metered.destroy();
  return { finished, indexed, reads, seconds, result, said: said.filter((line) => !line.includes('stuck PENDING')) };
}

async function main(): Promise<void> {
  const local = await startDynamoDbLocal();
  const client = localClient(local.endpoint);
  await createIdempotencyTable(client, TABLE);
  const template = await finishedRecord(client);
  const rows: Row[] = [];
  let filled = 0;
  for (const size of SIZES) {
    const started = performance.now();
    await fill(client, template, filled, size);
    filled = size;
    process.stderr.write(`${size} finished records in ${((performance.now() - started) / 1000).toFixed(0)} s\n`);
    for (const indexed of [true, false]) {
      await strand(client, `${size}-${indexed}`);
      rows.push(await sweep(local.endpoint, indexed, size));
      process.stderr.write(`${JSON.stringify(rows.at(-1))}\n`);
    }
  }
  // What a sweep of the largest table without the index reads at the default pace, in the reconciler's words.
  const unindexed = new DynamoDbIdempotencyRepository({ client, tableName: TABLE, inFlightIndex: false });
  const addIndex = addInFlightIndexCommand(TABLE, new TableLayout());
  const cost = { ...(await unindexed.inFlightCost()), addIndex };
  const atDefault = scanCostInWords(cost, DEFAULT_ITEMS_PER_SECOND, 60).text;
  client.destroy();
  await local.stop();
  const text = render(rows, atDefault);
  if (process.argv.includes('--print')) process.stdout.write(text);
  else writeFileSync(join(__dirname, 'SWEEP.md'), text);
}

function render(rows: Row[], atDefault: string): string {
  const n = (value: number) => value.toLocaleString('en-US');
  const table = rows
    .map(({ finished, indexed, reads, seconds, result }) => {
      const paced = indexed ? '—' : `${n(Math.ceil(reads.items / DEFAULT_ITEMS_PER_SECOND))} s`;
      return `| ${n(finished)} + ${STUCK} stuck | ${indexed ? 'with' : 'without'} | ${n(reads.items)} | ${n(result.ttlSampled)} | ${n(Math.ceil(reads.readUnits))} | ${seconds.toFixed(1)} s | ${paced} | ${result.stuckPending} | ${result.released} |`;
    })
    .join('\n');
  const said = rows.filter((row) => !row.indexed).at(-1)?.said[0];
  const saidText = said && (JSON.parse(said) as { msg: string }).msg;
  const text = `# What a sweep reads as the table grows

Generated by \`npm run bench:sweep\` on ${new Date().toISOString().slice(0, 10)}, on AWS's DynamoDB Local (which reports
\`ConsumedCapacity\`; DynamoDB bills a Scan or a Query by the size of the items it reads, half a read unit per 4 KB,
eventually consistent). One table, filled with \`BatchWriteItem\` with finished records as the module writes them
(COMPLETED, a 1 KB JSON response, 24 hours to live), then at each size 100 more keys left PENDING with leases that ended
an hour ago (a crashed process's), swept by \`IdempotencyReconciler.sweep()\`: **with** the index of keys in flight (the
default, as \`table:create\` makes the table) and **without** it (\`inFlightIndex: false\` on the same table, as a table
without the index is swept). Sweeps run unpaced here (\`maxPagesPerSecond\` 100,000) to time DynamoDB Local; a sweep
paces itself at 5 pages of 100 items a second by default, and the column "at the default pace" is the items read ÷ 500.

| table | index | items read | of them the TTL canary's | read units | seconds | at the default pace | stuck found | released |
|---|---|---:|---:|---:|---:|---:|---:|---:|
${table}

- **With the index** a sweep reads the keys in flight (here the 100 stuck ones: a Query of each of the index's 16
  shards, for leases past their end) and the TTL canary's sample (4 segments of a parallel scan, a page each): the same
  few hundred items and about 55 read units at every size, in a few seconds. The canary is an estimate from that sample
  (\`ttlEstimated\`); \`reconcile --ttl-count full\` counts every item on demand.
- **Without it** a sweep reads every item, so what it reads, its read units and its time grow with the finished
  records: linearly. At the default pace, the largest table's sweep takes the time in the column "at the default pace", and the
  reconciler says so at its first sweep (\`DescribeTable\`'s count and size), here with \`reconcileIntervalSeconds\` 60:

  > ${atDefault}

  At this run's unpaced rate it said: “${saidText ?? 'nothing'}”
`;
  return text;
}

main().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exit(1);
});
