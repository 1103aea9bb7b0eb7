import { TableLayout } from './table-layout';
import { recordStepRequest, restartClaimRequest, resumeClaimRequest } from './claim-requests';

/**
 * The claim's two forms and the step write, as DynamoDB receives them: the values a condition compares with and what
 * comes back. What each condition lets through is shown by behaviour in the contract kit (dynalite, DynamoDB Local).
 */
const plain = new TableLayout();
const renamed = new TableLayout({ attributeNames: { steps: 'journal', runs: 'claims' } });
const claim = {
  claim: { key: 'k', fingerprint: 'f', leaseSeconds: 30, clockSkewSeconds: 5, holder: 'host-a:42' },
  claimToken: 'c',
  nowSeconds: 1000,
};

describe('claim requests', () => {
  it('resumes with the lease cut-off the clock-skew margin before now, and asks for the old item on a win and a loss', () => {
    const request = resumeClaimRequest('t', plain, claim);
    expect(request.ExpressionAttributeValues).toMatchObject({
      ':leaseCutoff': { N: '995' },
      ':now': { N: '1000' },
      ':expiresAt': { N: '1030' },
      ':fingerprint': { S: 'f' },
      ':token': { S: 'c' },
      ':noSteps': { M: {} },
      ':one': { N: '1' },
      ':holder': { S: 'host-a:42' },
    });
    expect(request.ExpressionAttributeValues).not.toHaveProperty([':readToken']);
    expect(request.UpdateExpression).toContain('#steps = if_not_exists(#steps, :noSteps)');
    expect(request.UpdateExpression).toContain('ADD #runs :one');
    expect(request.ConditionExpression).toContain('#fingerprint = :fingerprint');
    expect(request.ReturnValues).toBe('ALL_OLD');
    expect(request.ReturnValuesOnConditionCheckFailure).toBe('ALL_OLD');
  });

  it('restarts only the record read (its claim token and status), with no steps and the first run', () => {
    const request = restartClaimRequest('t', plain, claim, { claimToken: 'old-token', status: 'PENDING' });
    expect(request.ExpressionAttributeValues).toMatchObject({
      ':readToken': { S: 'old-token' },
      ':readStatus': { S: 'PENDING' },
    });
    expect(request.ConditionExpression).toMatch(/AND #token = :readToken AND #status = :readStatus$/);
    expect(request.UpdateExpression).toContain('#steps = :noSteps, #runs = :one');
    expect(request.UpdateExpression).toContain('REMOVE #response, #completed, #renewed');
    expect(request.ReturnValues).toBe('NONE');
  });

  it('records a step under its name, guarded by the claim token, in a renamed layout', () => {
    const request = recordStepRequest(
      't',
      renamed,
      {
        key: 'k',
        claimToken: 'c',
        step: {
          name: 'charge',
          attempt: 2,
          run: 3,
          result: { statusCode: 200, headers: {}, body: { id: 'ch_1' }, bodyEncoding: 'typed' },
        },
      },
      1234,
    );
    expect(request.UpdateExpression).toBe('SET #steps.#step = :step');
    expect(request.ExpressionAttributeNames).toMatchObject({
      '#steps': 'journal',
      '#step': 'charge',
      '#token': 'claim_token',
    });
    expect(request.ExpressionAttributeValues).toEqual({
      ':step': {
        M: {
          value: { S: '{"id":"ch_1"}' },
          at: { N: '1234' },
          attempt: { N: '2' },
          run: { N: '3' },
        },
      },
      ':pending': { S: 'PENDING' },
      ':token': { S: 'c' },
    });
  });
});
