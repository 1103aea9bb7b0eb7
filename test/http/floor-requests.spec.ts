import { floorRequests } from '../../apps/orders-api/src/bench/floor-calls';
import { resumeClaimRequest } from '../../libs/idempotency/src/dynamodb/claim-requests';
import { completion, guarded, updateRequest } from '../../libs/idempotency/src/dynamodb/record-requests';
import { TableLayout } from '../../libs/idempotency/src/dynamodb/table-layout';

/**
 * The benchmark's floor sends exactly the module's requests (the default layout), so that it stays the floor for the
 * module's calls: a change of the claim's or the completion's shape fails here until the floor follows.
 */
describe("the bench floor's DynamoDB requests", () => {
  const layout = new TableLayout();
  const now = 1_800_000_000;

  it('the claim is the module’s claim (resume form) for a new key', () => {
    const module = resumeClaimRequest('t', layout, {
      claim: { key: 'POST /bench/floor#k', fingerprint: '-', leaseSeconds: 60, clockSkewSeconds: 0, holder: 'h:1' },
      claimToken: 'token',
      nowSeconds: now,
    });
    expect(floorRequests.claim('t', 'POST /bench/floor#k', 'token', now, 'h:1')).toEqual(module);
  });

  it('the completion is the module’s guarded completion', () => {
    const response = JSON.stringify({ statusCode: 200, headers: {}, body: { ok: true } });
    const module = updateRequest(
      't',
      layout,
      { key: 'POST /bench/floor#k' },
      guarded(layout, 'token', now + 86_400, completion(response, now)),
    );
    expect(floorRequests.complete('t', 'POST /bench/floor#k', 'token', now, { ok: true })).toEqual(module);
  });
});
