import { QueryCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { IdempotencyRecord } from '../repository/idempotency.record';
import { ScanInput } from '../repository/idempotency.repository';
import { listedRecords } from './item-mapping';
import { queryRequest, scanRequest } from './record-requests';
import { StoreCalls } from './store-calls';
import { TableLayout } from './table-layout';

/**
 * The module's records a page at a time, state only (no responses): a Scan of the table (in a shared table, only the
 * module's items), or a Query of one partition of a sort-key layout.
 */
export async function* scanRecords(
  calls: StoreCalls,
  tableName: string,
  layout: TableLayout,
  { pageSize, partition }: ScanInput,
): AsyncIterable<IdempotencyRecord[]> {
  if (partition !== undefined && !layout.sortKey) {
    throw new Error('records are listed by partition only in a table with a sort key (keySchema.sortKey)');
  }
  let startKey: Record<string, never> | undefined;
  do {
    const page =
      partition === undefined
        ? await calls.send('scan', new ScanCommand(scanRequest(tableName, layout, pageSize, startKey)))
        : await calls.send('query', new QueryCommand(queryRequest(tableName, layout, partition, pageSize, startKey)));
    yield listedRecords(layout, page.Items ?? []);
    startKey = page.LastEvaluatedKey as Record<string, never> | undefined;
  } while (startKey);
}
