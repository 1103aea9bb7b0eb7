import { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { Logger } from '@nestjs/common';
import { MAX_STORED_RESPONSE_BYTES } from '../idempotency.constants';
import { RECORD_KEY_SHAPE } from '../keys/record-key';
import { IdempotencyRecord, IdempotencyStatus, StoredResponse } from '../repository/idempotency.record';
import { decodeStoredResponse, encodedByteLength, encodeStoredResponse } from '../response/stored-response.codec';
import { isItemTooLarge } from './dynamodb-errors';
import { MapValue, stepEntries } from './step-mapping';
import { RecordAttribute, TableLayout } from './table-layout';

/** A record's attributes besides its key, by their default names (see the docs' stored item). */
export interface RecordItem {
  status: IdempotencyStatus;
  expires_at: number;
  claim_token: string;
  fingerprint: string;
  pending_since: number;
  completed_at?: number;
  response?: string | Uint8Array;
}

/** The placeholders expressions use for the key and each record attribute; `names` turns them into stored names. */
const PLACEHOLDERS: Record<string, RecordAttribute | 'partitionKey' | 'sortKey'> = {
  '#pk': 'partitionKey',
  '#sk': 'sortKey',
  '#status': 'status',
  '#expires': 'expires_at',
  '#token': 'claim_token',
  '#fingerprint': 'fingerprint',
  '#response': 'response',
  '#pending': 'pending_since',
  '#completed': 'completed_at',
  '#steps': 'steps',
  '#runs': 'runs',
  '#holder': 'holder',
  '#owners': 'owners',
  '#renewed': 'renewed_at',
  '#inflight': 'in_flight',
  '#version': 'version',
};

/**
 * `ExpressionAttributeNames` for the placeholders the expressions use, under the layout's names (DynamoDB refuses an
 * unused one). Every name goes through a placeholder: `status` is a reserved word, and the names are configurable.
 * The expressions are the repository's own few, so each answer is worked out once per layout and shared (frozen).
 */
export function names(layout: TableLayout, ...expressions: string[]): Record<string, string> {
  const text = expressions.join(' ');
  let known = namesByLayout.get(layout);
  if (!known) namesByLayout.set(layout, (known = new Map()));
  let used = known.get(text);
  if (!used) known.set(text, (used = Object.freeze(placeholderNames(layout, text))));
  return used;
}

const namesByLayout = new WeakMap<TableLayout, Map<string, Record<string, string>>>();

function placeholderNames(layout: TableLayout, expression: string): Record<string, string> {
  const used: Record<string, string> = {};
  for (const placeholder of expression.match(/#\w+/g) ?? []) {
    const attribute = PLACEHOLDERS[placeholder];
    if (attribute === 'partitionKey') used[placeholder] = layout.partitionKey;
    else if (attribute === 'sortKey') used[placeholder] = layout.sortKey!;
    else if (attribute) used[placeholder] = layout.names[attribute];
  }
  return used;
}

/**
 * Values as DynamoDB attribute values: strings (S), numbers (N), the gzipped response (B), the steps (M) and lists of
 * strings (L: the owners), the only types the item has; anything else is refused before sending.
 */
export function attributeValues(values: object): Record<string, AttributeValue> {
  const marshalled: Record<string, AttributeValue> = {};
  for (const [name, value] of Object.entries(values)) marshalled[name] = attributeValue(name, value);
  return marshalled;
}

function attributeValue(name: string, value: unknown): AttributeValue {
  if (typeof value === 'string') return { S: value };
  if (value instanceof MapValue) return { M: value.entries };
  if (typeof value === 'number') return { N: String(value) };
  if (value instanceof Uint8Array) return { B: value };
  if (Array.isArray(value) && value.every((each) => typeof each === 'string')) {
    return { L: value.map((each: string) => ({ S: each })) };
  }
  throw new TypeError(`${name}: an idempotency record has no attribute of type ${typeof value}`);
}

/** A record's item: its key under the layout's key attributes, its attributes under the layout's names. */
export function recordItem(
  layout: TableLayout,
  key: string,
  partition: string | undefined,
  item: RecordItem,
): Record<string, AttributeValue> {
  const marshalled = layout.itemKey(key, partition);
  for (const name of Object.keys(item) as RecordAttribute[]) {
    const stored = layout.names[name];
    marshalled[stored] = attributeValue(stored, (item as Partial<Record<RecordAttribute, unknown>>)[name]);
  }
  return marshalled;
}

/**
 * An item as DynamoDB returns it (to a low-level read, on a failed condition, in a scan), as a record; undefined for
 * an item that is not one of the module's records (another entity of a shared table).
 */
export function recordFromItem(
  layout: TableLayout,
  attributes: Record<string, unknown>,
): IdempotencyRecord | undefined {
  const item = unmarshall(attributes as Record<string, AttributeValue>);
  const key = layout.recordKeyOf(item[layout.recordKeyAttribute]);
  const read = (name: RecordAttribute) => item[layout.names[name]];
  if (key === undefined || typeof read('claim_token') !== 'string' || typeof read('status') !== 'string')
    return undefined;
  const completedAt = read('completed_at');
  const response = read('response');
  const stepMap = (attributes as Record<string, AttributeValue | undefined>)[layout.names.steps]?.M;
  const { steps, startedSteps } = stepMap === undefined ? {} : stepEntries(stepMap);
  const runs = read('runs');
  const holder = read('holder');
  const owners = read('owners');
  const renewedAt = read('renewed_at');
  const version = read('version');
  return {
    key,
    ...(layout.sortKey ? { partition: String(item[layout.partitionKey]) } : {}),
    status: read('status') as IdempotencyStatus,
    expiresAt: Number(read('expires_at')),
    claimToken: read('claim_token') as string,
    fingerprint: read('fingerprint') as string,
    pendingSince: Number(read('pending_since')),
    ...(typeof holder === 'string' && holder !== '' ? { holder } : {}),
    ...(Array.isArray(owners) ? { owners: owners.map(String) } : {}),
    ...(renewedAt === undefined ? {} : { renewedAt: Number(renewedAt) }),
    ...(typeof version === 'string' ? { version } : {}),
    completedAt: completedAt === undefined ? undefined : Number(completedAt),
    response: response === undefined ? undefined : decodeStoredResponse(response as string | Uint8Array),
    responseBytes: response === undefined ? undefined : encodedByteLength(response as string | Uint8Array),
    ...(steps === undefined ? {} : { steps }),
    ...(startedSteps?.length ? { startedSteps } : {}),
    ...(runs === undefined ? {} : { runs: Number(runs) }),
  };
}

const logger = new Logger('Idempotency');

const STATUSES = new Set<string>(['PENDING', 'COMPLETED', 'FAILED']);

/**
 * The module's records among a page of a listing or a sweep. An item whose key does not have the module's shape is
 * another entity of a shared table, left out; one whose key has it but whose attributes do not parse (a status the
 * module never writes, a time that is not a number) is reported and left out: neither is ever rewritten.
 */
export function listedRecords(layout: TableLayout, items: Record<string, unknown>[]): IdempotencyRecord[] {
  return items.flatMap((item) => {
    const record = recordFromItem(layout, item);
    if (!record || !RECORD_KEY_SHAPE.test(record.key)) return [];
    const problem = unparsable(record);
    if (problem === undefined) return [record];
    logger.warn({
      msg: 'skipped an item that has a record key but does not parse as a record',
      key: record.key,
      problem,
    });
    return [];
  });
}

/** What keeps a record read from a table from being one of the module's, or undefined. */
function unparsable(record: IdempotencyRecord): string | undefined {
  if (!STATUSES.has(record.status)) return `status ${JSON.stringify(record.status)}`;
  if (typeof record.fingerprint !== 'string') return 'no fingerprint';
  const times = { expires_at: record.expiresAt, pending_since: record.pendingSince, completed_at: record.completedAt };
  for (const [name, value] of Object.entries(times)) {
    if (value !== undefined && !Number.isFinite(value)) return `${name} is not a number`;
  }
  return undefined;
}

/**
 * The `response` attribute: JSON text, gzipped once large. One that would not fit in the item even compressed is
 * stored without its body (logged): the key stays done, and duplicates get 409 response-not-stored.
 */
export function responseAttribute(response: StoredResponse, stepBytes = 0): string | Uint8Array {
  const encoded = encodeStoredResponse(response);
  const limit = MAX_STORED_RESPONSE_BYTES - stepBytes;
  if (encodedByteLength(encoded) <= limit) return encoded;
  logger.warn(
    `Response of ${encodedByteLength(encoded)} bytes (compressed) exceeds the ${limit}-byte limit` +
      (stepBytes > 0 ? ` (the record's steps take ${stepBytes} of ${MAX_STORED_RESPONSE_BYTES})` : '') +
      ': ' +
      'stored without its body; duplicates get 409 response-not-stored',
  );
  return withoutBody(response);
}

function withoutBody(response: StoredResponse): string | Uint8Array {
  const { statusCode, headers } = response;
  return encodeStoredResponse({ statusCode, headers, bodyOmitted: true, omittedBecause: 'too-large' });
}

/**
 * Writes a completion with its response (`responseAttribute`), and once more without the body should DynamoDB still
 * refuse the item as over 400 KB (the module counts before sending; DynamoDB's count is the one that holds): a key
 * whose work has run is never left PENDING for a retry to run it again.
 */
export async function writeCompletion<T>(
  response: StoredResponse,
  stepBytes: number,
  write: (attribute: string | Uint8Array) => Promise<T>,
): Promise<T> {
  try {
    return await write(responseAttribute(response, stepBytes));
  } catch (error) {
    if (!isItemTooLarge(error)) throw error;
    logger.warn(
      'DynamoDB refused the completion as over its 400 KB item limit: stored without its body; duplicates get 409 response-not-stored',
    );
    return write(withoutBody(response));
  }
}
