import { ok, strictEqual } from 'node:assert/strict';
import { ClaimResult, RecordLocation } from '../repository/idempotency.repository';
import { RecordedStep, StoredResponse } from '../repository/idempotency.record';
import { ContractContext, sameData } from './contract-context';

/**
 * The contract, part four: recovery points (`recordStep`). A claim that resumes the same request (a FAILED attempt, an
 * expired lease, with the same fingerprint) hands back the steps recorded and its run number; another request is refused
 * a released record that holds steps until it expires, and starts without them; a step is recorded only while its claim
 * owns the record.
 */
export function stepCases(c: ContractContext): void {
  const { it, newKey, response } = c;
  const result: StoredResponse = {
    statusCode: 200,
    headers: {},
    body: { chargeId: 'ch_1', at: { $type: 'Date', value: '2026-12-04T10:00:00.000Z' } },
    bodyEncoding: 'typed',
  };
  const claimWith = (at: RecordLocation, fingerprint = 'fp') =>
    c.repository.claim({ ...at, fingerprint, leaseSeconds: 60 });
  const won = (claim: ClaimResult) => {
    ok(claim.claimed, 'the claim must win');
    return claim;
  };
  const record = async (at: RecordLocation, claimToken: string, name: string, run = 1) =>
    c.repository.recordStep({ ...at, claimToken, step: { name, result, attempt: 1, run } });
  const names = (steps: readonly RecordedStep[] | undefined) => (steps ?? []).map((step) => step.name).sort();

  it('starts a new key at run 1 without steps, and records a step for its owner', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    strictEqual(first.run, 1);
    sameData(first.steps, []);
    sameData(await record(at, first.claimToken, 'charge'), { ok: true });
    const read = await c.repository.get(at);
    strictEqual(read?.steps?.length, 1);
    const [step] = read!.steps!;
    sameData(
      { name: step.name, result: step.result, attempt: step.attempt, run: step.run },
      {
        name: 'charge',
        result,
        attempt: 1,
        run: 1,
      },
    );
    strictEqual(step.recordedAt, c.clock.nowSeconds());
  });

  it('hands the steps back to the claim that takes over an expired lease of the same request, as run 2', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    await record(at, first.claimToken, 'debit');
    await record(at, first.claimToken, 'charge');
    c.clock.advanceSeconds(61);
    const resumed = won(await claimWith(at));
    strictEqual(resumed.run, 2);
    sameData(names(resumed.steps), ['charge', 'debit']);
    sameData(resumed.steps?.find((step) => step.name === 'charge')?.result, result);
  });

  it('resumes a FAILED attempt of the same request with its steps, and the next step is added to them', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    await record(at, first.claimToken, 'debit');
    await c.repository.fail({ ...at, claimToken: first.claimToken, ttlSeconds: 300 });
    const resumed = won(await claimWith(at));
    sameData(names(resumed.steps), ['debit']);
    sameData(await record(at, resumed.claimToken, 'charge', 2), { ok: true });
    sameData(names((await c.repository.get(at))?.steps), ['charge', 'debit']);
  });

  it('takes a run released with forgetRun off the run count: the next claim has its number again', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    await record(at, first.claimToken, 'debit');
    strictEqual((await c.repository.get(at))?.runs, 1, 'the record counts the runs that claimed it');
    await c.repository.fail({ ...at, claimToken: first.claimToken, ttlSeconds: 300, forgetRun: true });
    strictEqual((await c.repository.get(at))?.runs, 0, 'a run released with forgetRun is taken off');
    const second = won(await claimWith(at));
    strictEqual(second.run, 1, 'the first run started no step it did not record');
    await c.repository.fail({ ...at, claimToken: second.claimToken, ttlSeconds: 300 });
    strictEqual(won(await claimWith(at)).run, 2, 'a run released without forgetRun counts');
  });

  it('keeps a released record that holds steps for its request: another fingerprint is refused until it expires, then starts without them', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    await record(at, first.claimToken, 'debit');
    await c.repository.fail({ ...at, claimToken: first.claimToken, ttlSeconds: 300 });
    const refused = await claimWith(at, 'another request');
    ok(!refused.claimed, 'another request must not take a released record that holds steps');
    strictEqual(refused.existing.fingerprint, 'fp');
    sameData(names((await c.repository.get(at))?.steps), ['debit'], 'the steps stay');
    c.clock.advanceSeconds(301);
    const other = won(await claimWith(at, 'another request'));
    strictEqual(other.run, 1);
    sameData(other.steps, []);
    sameData((await c.repository.get(at))?.steps ?? [], []);
  });

  it('lets another request take a released record without steps at once', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    await c.repository.fail({ ...at, claimToken: first.claimToken, ttlSeconds: 300 });
    strictEqual(won(await claimWith(at, 'another request')).run, 1);
  });

  it('starts a completed record claimed again after its retention without its steps', async () => {
    const at = newKey();
    const first = won(await claimWith(at));
    await record(at, first.claimToken, 'debit');
    await c.repository.complete({ ...at, claimToken: first.claimToken, response, ttlSeconds: 10 });
    sameData(names((await c.repository.get(at))?.steps), ['debit'], 'a completed record keeps its steps');
    c.clock.advanceSeconds(11);
    const again = won(await claimWith(at));
    strictEqual(again.run, 1);
    sameData(again.steps, []);
    strictEqual((await c.repository.get(at))?.response, undefined, 'nothing of the finished run is left');
  });

  it('refuses a step from an owner whose lease was taken over, and leaves the successor’s record as it was', async () => {
    const at = newKey();
    const orphan = won(await claimWith(at));
    c.clock.advanceSeconds(61);
    const successor = won(await claimWith(at));
    const refused = await record(at, orphan.claimToken, 'charge');
    ok(!refused.ok && refused.reason === 'lease_lost', `expected lease_lost, got ${JSON.stringify(refused)}`);
    strictEqual(refused.current?.claimToken, successor.claimToken);
    sameData((await c.repository.get(at))?.steps ?? [], []);
  });

  it('refuses a step once its own claim has completed the record', async () => {
    const at = newKey();
    const owner = won(await claimWith(at));
    await c.repository.complete({ ...at, claimToken: owner.claimToken, response, ttlSeconds: 60 });
    const late = await record(at, owner.claimToken, 'receipt');
    ok(!late.ok && late.reason === 'already_completed', `expected already_completed, got ${JSON.stringify(late)}`);
  });
}
