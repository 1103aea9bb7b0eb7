import { ok, strictEqual } from 'node:assert/strict';
import { ClaimResult, RecordLocation } from '../repository/idempotency.repository';
import { StoredResponse } from '../repository/idempotency.record';
import { ContractContext, sameData } from './contract-context';

/**
 * The contract, part four b: the starts of at-most-once steps (`startStep`). A start is kept with the steps and handed
 * back to a claim that resumes the request (`ClaimResult.startedSteps`), never as a recorded step; the step's result
 * replaces it; it holds a released record for its request like a recorded step; it is written only by the owner.
 */
export function startedStepCases(c: ContractContext): void {
  const { it, newKey } = c;
  const result: StoredResponse = { statusCode: 200, headers: {}, body: { sent: true }, bodyEncoding: 'typed' };
  const claimWith = (at: RecordLocation, fingerprint = 'fp') =>
    c.repository.claim({ ...at, fingerprint, leaseSeconds: 60 });
  const won = (claim: ClaimResult) => {
    ok(claim.claimed, 'the claim must win');
    return claim;
  };
  const start = (at: RecordLocation, claimToken: string, name: string, attempt = 1, run = 1) =>
    c.repository.startStep({ ...at, claimToken, step: { name, attempt, run } });

  it('keeps an at-most-once step’s start and hands it back to the claim that resumes the request, not as a recorded step', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    sameData(await start(at, first.claimToken, 'send'), { ok: true });
    const startedAt = c.clock.nowSeconds();
    sameData((await c.repository.get(at))?.startedSteps, [{ name: 'send', startedAt, attempt: 1, run: 1 }]);
    c.clock.advanceSeconds(61); // the owner died inside the step
    const resumed = won(await claimWith(at));
    sameData(resumed.startedSteps, [{ name: 'send', startedAt, attempt: 1, run: 1 }]);
    sameData(resumed.steps, []);
  });

  it('replaces a start with the step’s result once recorded', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    await start(at, first.claimToken, 'send');
    await c.repository.recordStep({
      ...at,
      claimToken: first.claimToken,
      step: { name: 'send', result, attempt: 1, run: 1 },
    });
    const read = await c.repository.get(at);
    strictEqual(read?.startedSteps?.length ?? 0, 0, 'the start is gone');
    sameData(
      read?.steps?.map((step) => [step.name, step.result]),
      [['send', result]],
    );
  });

  it('keeps a released record that holds a start for its request: another fingerprint is refused until it expires', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    await start(at, first.claimToken, 'send');
    await c.repository.fail({ ...at, claimToken: first.claimToken, ttlSeconds: 300 });
    ok(!(await claimWith(at, 'another request')).claimed, 'another request must not run over a started step');
    const resumed = won(await claimWith(at));
    sameData(
      resumed.startedSteps?.map((step) => step.name),
      ['send'],
    );
  });

  it('refuses a start from an owner whose lease was taken over, and leaves the successor’s record as it was', async () => {
    const at = newKey();
    const orphan = won(await claimWith(at));
    c.clock.advanceSeconds(61);
    const successor = won(await claimWith(at));
    const refused = await start(at, orphan.claimToken, 'send');
    ok(!refused.ok && refused.reason === 'lease_lost', `expected lease_lost, got ${JSON.stringify(refused)}`);
    strictEqual(refused.current?.claimToken, successor.claimToken);
    strictEqual((await c.repository.get(at))?.startedSteps?.length ?? 0, 0);
  });
}
