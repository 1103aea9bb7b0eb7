import { marshall } from '@aws-sdk/util-dynamodb';
import { names, recordFromItem } from './item-mapping';
import { TableLayout } from './table-layout';

/** What the end-to-end suites cannot show: how the names are shared between requests, and items that are not records. */
const shared = new TableLayout({
  keySchema: { partitionKey: 'PK', sortKey: 'SK' },
  keyPrefix: 'IDEMPOTENCY#',
  attributeNames: { status: 'state' },
});

describe('item mapping', () => {
  it('works out the names of one layout and expression once, and shares them frozen between requests', () => {
    const first = names(shared, '#status = :pending', '#sk');
    expect(first).toEqual({ '#status': 'state', '#sk': 'SK' });
    expect(names(shared, '#status = :pending', '#sk')).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(names(new TableLayout(), '#status = :pending')).toEqual({ '#status': 'status' });
  });

  it('reads another entity of a shared table as no record: without a claim token, a status, or the key prefix', () => {
    const record = { PK: 'tenant', SK: 'IDEMPOTENCY#k', state: 'PENDING', claim_token: 't', expires_at: 1 };
    expect(recordFromItem(shared, marshall(record))).toMatchObject({
      key: 'k',
      partition: 'tenant',
      status: 'PENDING',
    });
    const { claim_token: _token, ...withoutToken } = record;
    const { state: _state, ...withoutStatus } = record;
    expect(recordFromItem(shared, marshall(withoutToken))).toBeUndefined();
    expect(recordFromItem(shared, marshall(withoutStatus))).toBeUndefined();
    expect(recordFromItem(shared, marshall({ ...record, SK: 'ORDER#k' }))).toBeUndefined();
  });
});
