import { TableLayout } from './table-layout';
import { removeRequest } from './operator-requests';
import { getRequest, guarded, queryRequest, renewal, scanRequest } from './record-requests';

/**
 * The parts of each request that a local server answers the same either way: read consistency (dynalite and DynamoDB
 * Local are always consistent), what a listing leaves out, the page size and where a page starts, and the values a
 * condition compares with. The end-to-end suites show the rest by behaviour.
 */
const plain = new TableLayout();
const shared = new TableLayout({ keySchema: { partitionKey: 'PK', sortKey: 'SK' }, keyPrefix: 'IDEMPOTENCY#' });

describe('record requests', () => {
  it('reads one record strongly consistent: a waiting duplicate must see the completion the owner just wrote', () => {
    expect(getRequest('t', plain, { key: 'k' })).toEqual({
      TableName: 't',
      Key: { pk: { S: 'k' } },
      ConsistentRead: true,
    });
  });

  it('lists one partition strongly consistent, a page of the asked size from where the last one ended, without responses', () => {
    const startKey = { PK: { S: 'tenant' }, SK: { S: 'IDEMPOTENCY#a' } };
    const query = queryRequest('t', shared, 'tenant', 25, startKey);
    expect(query).toMatchObject({ ConsistentRead: true, Limit: 25, ExclusiveStartKey: startKey });
    expect(query.ExpressionAttributeValues).toEqual({
      ':partition': { S: 'tenant' },
      ':prefix': { S: 'IDEMPOTENCY#' },
    });
    expect(query.ProjectionExpression).not.toContain('#response');
    expect(Object.values(query.ExpressionAttributeNames!)).not.toContain('response');
  });

  it('scans a page of the asked size from where the last one ended, the state of each record without its response', () => {
    const startKey = { pk: { S: 'k' } };
    const scan = scanRequest('t', plain, 10, startKey);
    expect(scan).toMatchObject({
      Limit: 10,
      ExclusiveStartKey: startKey,
      FilterExpression: 'attribute_exists(#token)',
    });
    expect(Object.values(scan.ExpressionAttributeNames!).sort()).toEqual(
      [
        'claim_token',
        'completed_at',
        'expires_at',
        'fingerprint',
        'holder',
        'pending_since',
        'pk',
        'renewed_at',
        'status',
      ].sort(),
    );
    expect(scan.ExpressionAttributeValues).toBeUndefined();
  });

  it("scans a shared table for the module's own items only: a claim token and the key prefix, the sort key projected", () => {
    const scan = scanRequest('t', shared, 10);
    expect(scan.FilterExpression).toBe('attribute_exists(#token) AND begins_with(#key, :prefix)');
    expect(scan.ExpressionAttributeNames).toMatchObject({ '#key': 'SK', '#sk': 'SK', '#token': 'claim_token' });
    expect(scan.ProjectionExpression).toContain('#sk');
    expect(scan.ExpressionAttributeValues).toEqual({ ':prefix': { S: 'IDEMPOTENCY#' } });
  });

  it('guards a transition by the PENDING status and the claim token, and asks for the record when the guard fails', () => {
    expect(guarded(plain, 'c', 1060, renewal(1000))).toEqual({
      UpdateExpression: 'SET #expires = :expiresAt, #renewed = :now',
      ConditionExpression: '#status = :pending AND #token = :token',
      ExpressionAttributeNames: {
        '#expires': 'expires_at',
        '#renewed': 'renewed_at',
        '#status': 'status',
        '#token': 'claim_token',
      },
      ExpressionAttributeValues: { ':expiresAt': 1060, ':now': 1000, ':pending': 'PENDING', ':token': 'c' },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
  });

  it('removes a record only in the status and with the claim token it was read with, and returns it otherwise', () => {
    const remove = removeRequest('t', plain, { key: 'k' }, { status: 'PENDING', claimToken: 'c' });
    expect(remove).toMatchObject({
      Key: { pk: { S: 'k' } },
      ConditionExpression: '#status = :status AND #token = :token',
      ExpressionAttributeValues: { ':status': { S: 'PENDING' }, ':token': { S: 'c' } },
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
  });
});
