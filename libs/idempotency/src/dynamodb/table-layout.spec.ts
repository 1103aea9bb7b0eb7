import { recordKey, UNSCOPED_PARTITION } from '../keys/record-key';
import { TableLayout } from './table-layout';

/** The table layout's options are refused at startup when they cannot work, and map a record to the item's key. */
describe('TableLayout.from (the options, checked)', () => {
  const from = (options: Parameters<typeof TableLayout.from>[0]) => () => TableLayout.from(options, 'forRoot');

  it.each([
    [{ partitionKey: '' }, '{"partitionKey":""}'],
    [{ partitionKey: 'PK', sortKey: '' }, '{"partitionKey":"PK","sortKey":""}'],
    [{ partitionKey: 7 }, '{"partitionKey":7}'],
    [{}, '{}'],
  ])('refuses keySchema %j', (keySchema, shown) => {
    expect(from({ keySchema: keySchema as never })).toThrow(
      `forRoot: keySchema must be { partitionKey: string, sortKey?: string } with non-empty names, got ${shown}`,
    );
  });

  it('refuses an attribute that is not the record’s, or an empty name', () => {
    expect(from({ attributeNames: { owner: 'o' } as never })).toThrow(
      'forRoot: attributeNames.owner is not a record attribute (one of status, expires_at, claim_token, fingerprint, response, pending_since, completed_at, steps, runs, holder, owners, renewed_at, in_flight, version)',
    );
    expect(from({ attributeNames: { expires_at: '' } })).toThrow(
      'forRoot: attributeNames.expires_at must be a non-empty string, got ""',
    );
  });

  it('refuses a prefix that is not a string', () => {
    expect(from({ keyPrefix: 5 as never })).toThrow('forRoot: keyPrefix must be a string, got 5');
  });

  it('refuses a name used twice, by the keys or by two attributes', () => {
    expect(from({ keySchema: { partitionKey: 'PK', sortKey: 'PK' } })).toThrow(
      'forRoot: the attribute name PK is used twice in keySchema and attributeNames',
    );
    expect(from({ attributeNames: { expires_at: 'status' } })).toThrow('the attribute name status is used twice');
    expect(from({ keySchema: { partitionKey: 'ttl' }, attributeNames: { expires_at: 'ttl' } })).toThrow(
      'the attribute name ttl is used twice',
    );
  });

  it('accepts a full single-table layout, renaming only what it names', () => {
    const layout = TableLayout.from(
      { keySchema: { partitionKey: 'PK', sortKey: 'SK' }, attributeNames: { expires_at: 'ttl' }, keyPrefix: 'IDEM#' },
      'forRoot',
    );
    expect(layout.names).toEqual({
      status: 'status',
      expires_at: 'ttl',
      claim_token: 'claim_token',
      fingerprint: 'fingerprint',
      response: 'response',
      pending_since: 'pending_since',
      completed_at: 'completed_at',
      steps: 'steps',
      runs: 'runs',
      holder: 'holder',
      owners: 'owners',
      renewed_at: 'renewed_at',
      in_flight: 'in_flight',
      version: 'version',
    });
    expect(layout.recordKeyAttribute).toBe('SK');
  });
});

describe('TableLayout (where a record goes)', () => {
  it('puts the record key in the partition key by default, prefixed', () => {
    const layout = new TableLayout({ keyPrefix: 'IDEM#' });
    expect(layout.recordKeyAttribute).toBe('pk');
    expect(layout.itemKey('k', 'tenant-1')).toEqual({ pk: { S: 'IDEM#k' } });
    expect(layout.documentKey('k', 'tenant-1')).toEqual({ pk: 'IDEM#k' });
  });

  it('with a sort key, partitions by the call’s partition, or the unscoped one', () => {
    const layout = new TableLayout({ keySchema: { partitionKey: 'PK', sortKey: 'SK' }, keyPrefix: 'IDEM#' });
    expect(layout.itemKey('k', 'tenant-1')).toEqual({ PK: { S: 'tenant-1' }, SK: { S: 'IDEM#k' } });
    expect(layout.documentKey('k', undefined)).toEqual({ PK: `IDEM#${UNSCOPED_PARTITION}`, SK: 'IDEM#k' });
  });

  it('reads a record key back only from an item it wrote', () => {
    const layout = new TableLayout({ keyPrefix: 'IDEM#' });
    expect(layout.recordKeyOf('IDEM#k')).toBe('k');
    expect(layout.recordKeyOf('ORDER#1')).toBeUndefined();
    expect(layout.recordKeyOf(42)).toBeUndefined();
    expect(new TableLayout().recordKeyOf('anything')).toBe('anything');
  });

  it('spreads the keys in flight over 16 shards of the index, by the key prefix and the hash’s last digit', () => {
    const layout = new TableLayout({ keyPrefix: 'IDEM#' });
    const shards = new Set(
      Array.from({ length: 400 }, (_, n) => layout.inFlightShard(recordKey('POST /orders', undefined, `k${n}`))),
    );
    expect([...shards].sort()).toEqual(Array.from({ length: 16 }, (_, n) => `IDEM#in-flight#${n.toString(16)}`).sort());
    expect(layout.inFlightShard('POST /orders#00f')).toBe('IDEM#in-flight#f');
    // a key not made by recordKey (the repository called directly) still lands on one of the 16, the same each time
    expect(layout.inFlightShard('order-xyz')).toBe(layout.inFlightShard('order-xyz'));
    expect(shards.has(layout.inFlightShard('order-xyz'))).toBe(true);
    expect(new Set(['g', 'h', 'i', 'j', 'k', 'l'].map((key) => layout.inFlightShard(key))).size).toBe(6);
  });
});
