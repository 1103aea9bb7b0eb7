import { QueryCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { IdempotencyRecord } from '../repository/idempotency.record';
import { InFlightInput, ScanInput } from '../repository/idempotency.repository';
import { listedRecords } from './item-mapping';
import { inFlightQueryRequest, queryRequest, scanRequest } from './record-requests';
import { StoreCalls } from './store-calls';
import { IN_FLIGHT_SHARDS, TableLayout } from './table-layout';

/**
 * The module's records a page at a time, state only (no responses): a Scan of the table (in a shared table, only the
 * module's items), or a Query of one partition of a sort-key layout.
 */
export async function* scanRecords(
  calls: StoreCalls,
  tableName: string,
  layout: TableLayout,
  { pageSize, partition, segment, maxPages = Infinity }: ScanInput,
): AsyncIterable<IdempotencyRecord[]> {
  if (partition !== undefined && !layout.sortKey) {
    throw new Error('records are listed by partition only in a table with a sort key (keySchema.sortKey)');
  }
  let startKey: Record<string, never> | undefined;
  let pages = 0;
  do {
    const page =
      partition === undefined
        ? await calls.send('scan', new ScanCommand(scanRequest(tableName, layout, pageSize, startKey, segment)))
        : await calls.send('query', new QueryCommand(queryRequest(tableName, layout, partition, pageSize, startKey)));
    yield listedRecords(layout, page.Items ?? []);
    startKey = page.LastEvaluatedKey as Record<string, never> | undefined;
  } while (startKey && ++pages < maxPages);
}

/** The keys in flight from the table's index of them, shard by shard, a page at a time. */
export async function* inFlightRecords(
  calls: StoreCalls,
  tableName: string,
  layout: TableLayout,
  { pageSize, leaseEndedBefore }: InFlightInput,
): AsyncIterable<IdempotencyRecord[]> {
  for (let shard = 0; shard < IN_FLIGHT_SHARDS; shard++) {
    let startKey: Record<string, never> | undefined;
    do {
      const request = inFlightQueryRequest(tableName, layout, shard, pageSize, startKey, leaseEndedBefore);
      const page = await calls.send('query', new QueryCommand(request));
      const records = listedRecords(layout, page.Items ?? []);
      if (records.length > 0) yield records;
      startKey = page.LastEvaluatedKey as Record<string, never> | undefined;
    } while (startKey);
  }
}
