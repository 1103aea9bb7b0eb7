import {
  AttributeDefinition,
  DescribeTableCommand,
  DynamoDBClient,
  GlobalSecondaryIndex,
  GlobalSecondaryIndexDescription,
  TableDescription,
} from '@aws-sdk/client-dynamodb';
import { InFlightCost } from '../repository/idempotency.repository';
import { dynamoErrorCode } from './dynamodb-errors';
import { TableLayout } from './table-layout';

/**
 * The sparse index of the keys in flight (docs/scaling.md): partition key the record's `in_flight` shard (written by a
 * claim, removed by the completion, a failure or a release in the write they already make: only PENDING records carry
 * it), sort key `expires_at` (the lease's end). It projects what a sweep and a listing of PENDING records read, not the
 * responses. On-demand tables give it on-demand capacity; a provisioned table's index needs capacity like the table's
 * writes (a throttled index throttles the table's writes).
 */
export function inFlightIndexDefinition(layout: TableLayout): {
  attributes: AttributeDefinition[];
  index: GlobalSecondaryIndex;
} {
  const { names } = layout;
  return {
    attributes: [
      { AttributeName: names.in_flight, AttributeType: 'S' },
      { AttributeName: names.expires_at, AttributeType: 'N' },
    ],
    index: {
      IndexName: layout.inFlightIndex,
      KeySchema: [
        { AttributeName: names.in_flight, KeyType: 'HASH' },
        { AttributeName: names.expires_at, KeyType: 'RANGE' },
      ],
      Projection: {
        ProjectionType: 'INCLUDE',
        NonKeyAttributes: [
          names.status,
          names.claim_token,
          names.fingerprint,
          names.pending_since,
          names.holder,
          names.renewed_at,
        ],
      },
    },
  };
}

/** The table's index of keys in flight as the layout names it: `ACTIVE`, another status, `missing`, or `other-keys`. */
export function inFlightIndexState(layout: TableLayout, table: TableDescription | undefined): string {
  if (!layout.inFlightIndex) return 'missing';
  const found: GlobalSecondaryIndexDescription | undefined = table?.GlobalSecondaryIndexes?.find(
    (index) => index.IndexName === layout.inFlightIndex,
  );
  if (!found) return 'missing';
  const keys = (found.KeySchema ?? []).map((key) => `${key.AttributeName}:${key.KeyType}`).join(',');
  const { names } = layout;
  if (keys !== `${names.in_flight}:HASH,${names.expires_at}:RANGE`) return 'other-keys';
  return found.IndexStatus ?? 'ACTIVE';
}

/**
 * The AWS CLI command that adds the index to an existing table (its attribute names following the layout), and waits
 * for nothing: DynamoDB backfills it from the records in flight. On a provisioned table the index gets the table's
 * capacity (a throttled index throttles the table's writes; docs/scaling.md); on an on-demand one, on-demand capacity.
 */
export function addInFlightIndexCommand(tableName: string, layout: TableLayout, table?: TableDescription): string {
  const { attributes, index } = inFlightIndexDefinition(layout);
  const definitions = attributes.map(
    ({ AttributeName, AttributeType }) => `AttributeName=${AttributeName},AttributeType=${AttributeType}`,
  );
  const provisioned = provisionedCapacityOf(table);
  const update = JSON.stringify([
    { Create: { ...index, ...(provisioned ? { ProvisionedThroughput: provisioned } : {}) } },
  ]);
  return (
    `aws dynamodb update-table --table-name ${tableName} ` +
    `--attribute-definitions ${definitions.join(' ')} --global-secondary-index-updates '${update}'`
  );
}

/** A provisioned table's read and write capacity, or undefined for an on-demand table (or one not described). */
function provisionedCapacityOf(
  table: TableDescription | undefined,
): { ReadCapacityUnits: number; WriteCapacityUnits: number } | undefined {
  if (table?.BillingModeSummary?.BillingMode === 'PAY_PER_REQUEST') return undefined;
  const { ReadCapacityUnits = 0, WriteCapacityUnits = 0 } = table?.ProvisionedThroughput ?? {};
  // On-demand tables report 0 units; a table made before billing modes existed has no summary, only its units.
  return WriteCapacityUnits > 0 ? { ReadCapacityUnits, WriteCapacityUnits } : undefined;
}

/**
 * What reading a table's keys in flight reads (`DescribeTable`): its index of them when ACTIVE, else a scan of its items
 * (also when the table cannot be described: the error's code is kept, for the reconciler to say).
 */
export async function inFlightCostOf(
  client: DynamoDBClient,
  tableName: string,
  layout: TableLayout,
): Promise<InFlightCost> {
  let table: TableDescription | undefined;
  try {
    ({ Table: table } = await client.send(new DescribeTableCommand({ TableName: tableName })));
  } catch (error) {
    return { indexed: false, undescribed: dynamoErrorCode(error) };
  }
  const size = { itemCount: table?.ItemCount, sizeBytes: table?.TableSizeBytes };
  if (inFlightIndexState(layout, table) === 'ACTIVE') return { indexed: true, index: layout.inFlightIndex, ...size };
  if (!layout.inFlightIndex) return { indexed: false, ...size };
  return { indexed: false, ...size, addIndex: addInFlightIndexCommand(tableName, layout, table) };
}
