import { ManualClock } from '../testing/manual-clock';
import { InMemoryIdempotencyRepository } from '../repository/in-memory-idempotency.repository';
import { IdempotencyAdmin } from './idempotency-admin';

/**
 * `IdempotencyAdmin.release` (`keys:release`) on records whose only steps are at-most-once starts: a start is a step
 * the record holds (its effect may have happened), so a plain release keeps it, as it keeps recorded steps; only
 * `--force` forgets it. On DynamoDB from the CLI: test/steps/step-surgery.e2e-spec.ts.
 */
describe('IdempotencyAdmin.release of a record holding started steps', () => {
  let clock: ManualClock;
  let repository: InMemoryIdempotencyRepository;
  let admin: IdempotencyAdmin;
  let keys = 0;

  beforeEach(() => {
    clock = new ManualClock(1_800_000_000_000);
    repository = new InMemoryIdempotencyRepository(clock);
    admin = new IdempotencyAdmin({ repository, clock });
  });

  /** A run that started the at-most-once step `mail` and died inside it: its lease has passed. */
  async function crashedInside() {
    const key = `release-${++keys}`;
    const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 30 });
    if (!claim.claimed) throw new Error('not claimed');
    await repository.startStep({ key, claimToken: claim.claimToken, step: { name: 'mail', attempt: 1, run: 1 } });
    clock.advanceSeconds(31);
    return { key, claimToken: claim.claimToken, selector: { recordKey: key } };
  }

  it('keeps the start of a crashed run: FAILED, and the next claim of the request is handed the start', async () => {
    const { key, selector } = await crashedInside();
    const released = await admin.release(selector);
    expect(released).toMatchObject({ done: true, note: expect.stringContaining('1 step(s) recorded or started') });
    expect(await repository.get({ key })).toMatchObject({ status: 'FAILED', startedSteps: [{ name: 'mail' }] });
    const next = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 30 });
    expect(next).toMatchObject({ claimed: true, startedSteps: [{ name: 'mail', attempt: 1 }] });
  });

  it('reopens an unknown outcome with its start kept: the next run meets the start again, never runs it blindly', async () => {
    const { key, claimToken, selector } = await crashedInside();
    const again = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 30 });
    if (!again.claimed) throw new Error('not claimed');
    const problem = { statusCode: 500, headers: {}, body: { type: 'step-outcome-unknown' } };
    await repository.fail({ key, claimToken: again.claimToken, ttlSeconds: 3600, response: problem });
    expect(claimToken).not.toBe(again.claimToken);
    const released = await admin.release(selector);
    expect(released).toMatchObject({ done: true });
    const record = await repository.get({ key });
    expect(record).toMatchObject({ status: 'FAILED', startedSteps: [{ name: 'mail' }] });
    expect(record?.response).toBeUndefined();
  });

  it('--force removes it, and says the started step is forgotten', async () => {
    const { key, selector } = await crashedInside();
    const released = await admin.release(selector, { force: true });
    expect(released).toMatchObject({ done: true, note: expect.stringContaining('forgotten') });
    expect(await repository.get({ key })).toBeUndefined();
  });
});
