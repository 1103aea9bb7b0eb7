import type { BatchTransport } from '../errors/outcomes';

/**
 * The records of the Lambda event sources whose batches `processBatch` takes, as far as it reads them (the shapes of
 * `aws-lambda`'s `SQSRecord`, `KinesisStreamRecord` and `DynamoDBRecord`, without depending on that package).
 */
export interface SqsRecordLike {
  /** `aws:sqs`. */
  eventSource: string;
  messageId: string;
  body: string;
  /** The queue's ARN: a FIFO queue's name ends in `.fifo`. */
  eventSourceARN?: string;
  attributes?: { MessageGroupId?: string };
  messageAttributes?: Record<string, { stringValue?: string } | undefined>;
}

export interface KinesisRecordLike {
  /** `aws:kinesis`. */
  eventSource: string;
  eventID: string;
  kinesis: { sequenceNumber: string; data: string };
}

export interface DynamoDbStreamRecordLike {
  /** `aws:dynamodb`. */
  eventSource?: string;
  eventID?: string;
  eventName?: string;
  dynamodb?: { SequenceNumber?: string; Keys?: unknown; NewImage?: unknown };
}

export type BatchRecord = SqsRecordLike | KinesisRecordLike | DynamoDbStreamRecordLike;

/** How a batch from one source is read and reported. */
export interface BatchSource<T extends BatchRecord = BatchRecord> {
  /** `sqs` (standard), `sqs-fifo`, `kinesis` or `dynamodb-streams`. */
  kind: 'sqs' | 'sqs-fifo' | 'kinesis' | 'dynamodb-streams';
  /** What its records' outcome events say. */
  transport: BatchTransport;
  /** The record's own key when none is chosen: the message id, the stream event's id. */
  defaultKey(record: T): string;
  /** What makes two deliveries of one key the same: the message body, the stream record's data or change. */
  defaultFingerprint(record: T): unknown;
  /** The record as `batchItemFailures` names it: the message id, or the stream record's sequence number. */
  itemIdentifier(record: T): string;
  /** SQS FIFO: the record's message group (order is kept within it). */
  group?(record: T): string;
  /**
   * The fields (dotted paths, each a string) a record must have: for its identifier always, for the default key and
   * the default fingerprint when those are not chosen.
   */
  fields: { identifier: string; key: string; fingerprint?: string };
}

const SQS: BatchSource<SqsRecordLike> = {
  kind: 'sqs',
  transport: 'sqs',
  defaultKey: (record) => record.messageId,
  defaultFingerprint: (record) => record.body,
  itemIdentifier: (record) => record.messageId,
  fields: { identifier: 'messageId', key: 'messageId', fingerprint: 'body' },
};

const SQS_FIFO: BatchSource<SqsRecordLike> = {
  ...SQS,
  kind: 'sqs-fifo',
  group: (record) => record.attributes?.MessageGroupId ?? '',
};

const KINESIS: BatchSource<KinesisRecordLike> = {
  kind: 'kinesis',
  transport: 'kinesis',
  defaultKey: (record) => record.eventID,
  defaultFingerprint: (record) => record.kinesis.data,
  itemIdentifier: (record) => record.kinesis.sequenceNumber,
  fields: { identifier: 'kinesis.sequenceNumber', key: 'eventID', fingerprint: 'kinesis.data' },
};

const DYNAMODB_STREAMS: BatchSource<DynamoDbStreamRecordLike> = {
  kind: 'dynamodb-streams',
  transport: 'dynamodb-streams',
  defaultKey: (record) => record.eventID ?? '',
  defaultFingerprint: ({ eventName, dynamodb }) => ({ eventName, keys: dynamodb?.Keys, newImage: dynamodb?.NewImage }),
  itemIdentifier: (record) => record.dynamodb?.SequenceNumber ?? '',
  fields: { identifier: 'dynamodb.SequenceNumber', key: 'eventID' },
};

/** The batch's source, from its records (all of one source); a TypeError for anything else. */
export function batchSource(records: unknown): BatchSource {
  if (!Array.isArray(records)) throw new TypeError('processBatch: the event has no Records array');
  records.forEach((record, index) => {
    if (typeof record !== 'object' || record === null || Array.isArray(record)) {
      throw new TypeError(
        `processBatch: Records[${index}] is ${JSON.stringify(record) ?? String(record)}, not a record`,
      );
    }
  });
  const sources = new Set(records.map((record) => (record as { eventSource?: unknown }).eventSource));
  if (sources.size > 1) throw new TypeError(`processBatch: records of several sources (${[...sources].join(', ')})`);
  const [source] = sources;
  if (source === undefined && records.length === 0) return SQS as BatchSource;
  if (source === 'aws:sqs') {
    const fifo = (records as SqsRecordLike[]).some((record) => record.eventSourceARN?.endsWith('.fifo'));
    return (fifo ? SQS_FIFO : SQS) as BatchSource;
  }
  if (source === 'aws:kinesis') return KINESIS as BatchSource;
  if (source === 'aws:dynamodb') return DYNAMODB_STREAMS as BatchSource;
  throw new TypeError(
    `processBatch takes SQS, Kinesis and DynamoDB Streams events; these records come from ${String(source)}`,
  );
}

/**
 * Checks every record before any runs: each has the fields its source's batch reads (its identifier; its default key
 * and fingerprint unless chosen), a `TypeError` naming the first record and field missing. A record that cannot be
 * identified cannot be reported for redelivery: `{ itemIdentifier: undefined }` would fail the whole batch.
 */
export function checkRecords(
  records: readonly BatchRecord[],
  source: BatchSource,
  chosen: { key: boolean; fingerprint: boolean },
): void {
  const { identifier, key, fingerprint } = source.fields;
  const paths = [
    identifier,
    ...(chosen.key ? [] : [key]),
    ...(chosen.fingerprint || !fingerprint ? [] : [fingerprint]),
  ];
  records.forEach((record, index) => {
    for (const path of new Set(paths)) {
      const value = path
        .split('.')
        .reduce<unknown>((at, name) => (at as Record<string, unknown> | undefined)?.[name], record);
      if (typeof value !== 'string' || (path !== fingerprint && value === '')) {
        throw new TypeError(
          `processBatch: Records[${index}] (${source.kind}) has no ${path} (a ${path === fingerprint ? '' : 'non-empty '}string)` +
            `, got ${JSON.stringify(value) ?? 'nothing'}; no record of the batch was run`,
        );
      }
    }
  });
}

/** An SQS message attribute's text (`keyAttribute: 'Idempotency-Key'`); undefined when absent. */
export function messageAttribute(record: BatchRecord, name: string): string | undefined {
  if (record.eventSource !== 'aws:sqs') return undefined;
  return (record as SqsRecordLike).messageAttributes?.[name]?.stringValue;
}
