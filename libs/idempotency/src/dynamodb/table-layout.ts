import { AttributeValue } from '@aws-sdk/client-dynamodb';
import { UNSCOPED_PARTITION } from '../keys/record-key';

/** The record's attributes besides its key, by their default names. */
export type RecordAttribute =
  | 'status'
  | 'expires_at'
  | 'claim_token'
  | 'fingerprint'
  | 'response'
  | 'pending_since'
  | 'completed_at'
  | 'steps'
  | 'runs'
  | 'holder'
  | 'owners'
  | 'renewed_at'
  | 'in_flight'
  | 'version';

const RECORD_ATTRIBUTES: RecordAttribute[] = [
  'status',
  'expires_at',
  'claim_token',
  'fingerprint',
  'response',
  'pending_since',
  'completed_at',
  'steps',
  'runs',
  'holder',
  'owners',
  'renewed_at',
  'in_flight',
  'version',
];

/** The shards of the index of keys in flight: 16 partition values, so that no index partition is hot. */
export const IN_FLIGHT_SHARDS = 16;
/** The default name of the index of keys in flight (`table:create` makes it; `inFlightIndex` names another). */
export const DEFAULT_IN_FLIGHT_INDEX = 'in_flight';

/** How the records sit in a table: its keys, the attributes' names, a prefix that marks the module's items. */
export interface TableLayoutOptions {
  /** The table's key. Default `{ partitionKey: 'pk' }`. With a `sortKey`, a record's key goes there (see `partition`). */
  keySchema?: { partitionKey: string; sortKey?: string };
  /** Other names for the record's attributes (`{ expires_at: 'ttl' }`); the rest keep theirs. */
  attributeNames?: Partial<Record<RecordAttribute, string>>;
  /** Put before every key value the module writes (`IDEMPOTENCY#`), so its items are told apart in a shared table. */
  keyPrefix?: string;
  /**
   * The sparse global secondary index of the keys in flight (docs/scaling.md): every PENDING record carries the
   * `in_flight` attribute (a shard), the index's partition key, with `expires_at` (the lease's end) its sort key, so that
   * a sweep and `keys:list --status PENDING` read the records in flight and nothing else. Default `'in_flight'`, used
   * when the table has it (a table without it works as before, its sweeps reading the table); `false`: never used.
   */
  inFlightIndex?: string | false;
}

/**
 * Where a record's parts go in the table. By default the record key is the partition key `pk` (today's layout). With a
 * sort key (single-table design) the record key is the sort key and the partition is the call's scope, so one
 * tenant's records form one item collection. `keyPrefix` is put before the key values the module derives.
 */
export class TableLayout {
  readonly partitionKey: string;
  readonly sortKey?: string;
  readonly keyPrefix: string;
  /** The index of keys in flight the module looks for, or undefined (`inFlightIndex: false`). */
  readonly inFlightIndex?: string;
  /** The stored name of each record attribute. */
  readonly names: Readonly<Record<RecordAttribute, string>>;

  constructor({
    keySchema = { partitionKey: 'pk' },
    attributeNames = {},
    keyPrefix = '',
    inFlightIndex = DEFAULT_IN_FLIGHT_INDEX,
  }: TableLayoutOptions = {}) {
    this.partitionKey = keySchema.partitionKey;
    this.sortKey = keySchema.sortKey;
    this.keyPrefix = keyPrefix;
    this.inFlightIndex = inFlightIndex || undefined;
    this.names = Object.fromEntries(RECORD_ATTRIBUTES.map((name) => [name, attributeNames[name] ?? name])) as Record<
      RecordAttribute,
      string
    >;
  }

  /** Checks the options (names non-empty and distinct, no record attribute on a key); `where` names the caller in errors. */
  static from(options: TableLayoutOptions, where: string): TableLayout {
    const { keySchema, attributeNames, keyPrefix } = options;
    const text = (value: unknown) => typeof value === 'string' && value.length > 0;
    if (
      keySchema !== undefined &&
      (!text(keySchema?.partitionKey) || (keySchema.sortKey !== undefined && !text(keySchema.sortKey)))
    ) {
      throw new Error(
        `${where}: keySchema must be { partitionKey: string, sortKey?: string } with non-empty names, got ${JSON.stringify(keySchema)}`,
      );
    }
    for (const [name, value] of Object.entries(attributeNames ?? {})) {
      if (!RECORD_ATTRIBUTES.includes(name as RecordAttribute)) {
        throw new Error(
          `${where}: attributeNames.${name} is not a record attribute (one of ${RECORD_ATTRIBUTES.join(', ')})`,
        );
      }
      if (!text(value))
        throw new Error(`${where}: attributeNames.${name} must be a non-empty string, got ${JSON.stringify(value)}`);
    }
    if (keyPrefix !== undefined && typeof keyPrefix !== 'string')
      throw new Error(`${where}: keyPrefix must be a string, got ${String(keyPrefix)}`);
    const { inFlightIndex } = options;
    if (inFlightIndex !== undefined && inFlightIndex !== false && !text(inFlightIndex)) {
      throw new TypeError(
        `${where}: inFlightIndex must be an index name or false, got ${JSON.stringify(inFlightIndex)}`,
      );
    }
    const layout = new TableLayout(options);
    const all = [layout.partitionKey, ...(layout.sortKey ? [layout.sortKey] : []), ...Object.values(layout.names)];
    const repeated = all.find((name, index) => all.indexOf(name) !== index);
    if (repeated)
      throw new Error(`${where}: the attribute name ${repeated} is used twice in keySchema and attributeNames`);
    return layout;
  }

  /** The attribute that holds the record key: the sort key when there is one, else the partition key. */
  get recordKeyAttribute(): string {
    return this.sortKey ?? this.partitionKey;
  }

  /** The partition value of a record: its own key when the table has no sort key, else the call's partition. */
  partitionValue(key: string, partition: string | undefined): string {
    return this.sortKey ? (partition ?? `${this.keyPrefix}${UNSCOPED_PARTITION}`) : `${this.keyPrefix}${key}`;
  }

  /** The item key of a record, as low-level attribute values. */
  itemKey(key: string, partition: string | undefined): Record<string, AttributeValue> {
    const item: Record<string, AttributeValue> = { [this.partitionKey]: { S: this.partitionValue(key, partition) } };
    if (this.sortKey) item[this.sortKey] = { S: `${this.keyPrefix}${key}` };
    return item;
  }

  /** The item key of a record, as plain values (for the DocumentClient's transactions). */
  documentKey(key: string, partition: string | undefined): Record<string, string> {
    const item: Record<string, string> = { [this.partitionKey]: this.partitionValue(key, partition) };
    if (this.sortKey) item[this.sortKey] = `${this.keyPrefix}${key}`;
    return item;
  }

  /**
   * The shard of the index of keys in flight a record's claim writes: the key prefix, `in-flight#` and the last hex
   * digit of the record key's hash (16 shards), the same for every claim of the key; a key given to the repository
   * without one (not made by `recordKey`) by the sum of its characters.
   */
  inFlightShard(recordKey: string): string {
    const digit = parseInt(recordKey.slice(-1), 16);
    if (!Number.isNaN(digit)) return this.inFlightShardValue(digit);
    return this.inFlightShardValue([...recordKey].reduce((sum, char) => sum + char.charCodeAt(0), 0) % 16);
  }

  /** The partition value of shard `n` of the index of keys in flight. */
  inFlightShardValue(n: number): string {
    return `${this.keyPrefix}in-flight#${n.toString(16)}`;
  }

  /** A record key read back from an item's key value (the prefix taken off), or undefined for another item. */
  recordKeyOf(stored: unknown): string | undefined {
    if (typeof stored !== 'string' || !stored.startsWith(this.keyPrefix)) return undefined;
    return stored.slice(this.keyPrefix.length);
  }
}
