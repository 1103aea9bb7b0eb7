import { ok, strictEqual } from 'node:assert/strict';
import { ClaimInput, ClaimResult, RecordLocation } from '../repository/idempotency.repository';
import { StoredResponse } from '../repository/idempotency.record';
import { ContractContext, sameData } from './contract-context';

/**
 * The contract, part four c: versions (`ClaimInput.version`, `onVersionChange`). A versioned claim writes its version;
 * one that would resume a request's steps written by another version (or by none) loses with the record unchanged
 * (`'refuse'`), takes it over without them (`'restart'`), or resumes them (`'resume'`); a record without steps, or of
 * its version, is resumed as before; a claim without a version leaves the record's as it is.
 */
export function versionCases(c: ContractContext): void {
  const { it, newKey } = c;
  const result: StoredResponse = { statusCode: 200, headers: {}, body: { charged: true }, bodyEncoding: 'typed' };
  const claim = (at: RecordLocation, version?: string, onVersionChange?: ClaimInput['onVersionChange']) =>
    c.repository.claim({ ...at, fingerprint: 'fp', leaseSeconds: 60, version, onVersionChange });
  const won = (result_: ClaimResult) => {
    ok(result_.claimed, 'the claim must win');
    return result_;
  };
  /** A record of `version` whose run recorded a step, then was released (its handler threw). */
  const released = async (version?: string) => {
    const at = newKey();
    const first = won(await claim(at, version));
    const step = { name: 'charge', result, attempt: 1, run: 1 };
    await c.repository.recordStep({ ...at, claimToken: first.claimToken, step });
    await c.repository.fail({ ...at, claimToken: first.claimToken, ttlSeconds: 300 });
    return at;
  };

  it('writes a versioned claim’s version on the record; a claim without one leaves it', async () => {
    const at = newKey();
    const first = won(await claim(at, '1'));
    strictEqual((await c.repository.get(at))?.version, '1');
    await c.repository.fail({ ...at, claimToken: first.claimToken, ttlSeconds: 300 });
    won(await claim(at));
    strictEqual((await c.repository.get(at))?.version, '1');
  });

  it('refuses a resume of steps another version recorded: the claim loses and the record is as it was', async () => {
    const at = await released('1');
    const before = await c.repository.get(at);
    const refused = await claim(at, '2', 'refuse');
    ok(!refused.claimed, 'version 2 must not resume the steps version 1 recorded');
    strictEqual(refused.existing.version, '1');
    sameData(await c.repository.get(at), before);
    const resumed = won(await claim(at, '1'));
    sameData(
      resumed.steps?.map((step) => step.name),
      ['charge'],
    );
  });

  it('refuses by default, and counts a record written without a version as another version', async () => {
    const at = await released(undefined);
    ok(!(await claim(at, '2')).claimed, 'the default is refuse; a record without a version is not version 2');
  });

  it('resumes a record of another version that holds no steps, and writes its own version', async () => {
    const at = newKey();
    const first = won(await claim(at, '1'));
    await c.repository.fail({ ...at, claimToken: first.claimToken, ttlSeconds: 300 });
    won(await claim(at, '2', 'refuse'));
    strictEqual((await c.repository.get(at))?.version, '2');
  });

  it('restarts a record of another version without its steps (onVersionChange restart), and resumes them with resume', async () => {
    const restarted = await released('1');
    const fresh = won(await claim(restarted, '2', 'restart'));
    sameData([fresh.run, fresh.steps ?? []], [1, []]);
    strictEqual((await c.repository.get(restarted))?.version, '2');
    const resumedAt = await released('1');
    const resumed = won(await claim(resumedAt, '2', 'resume'));
    sameData(
      resumed.steps?.map((step) => step.name),
      ['charge'],
    );
  });
}
