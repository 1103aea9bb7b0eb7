import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { IdempotencyLeaseLostError } from '../errors/idempotency.errors';
import { MAX_STEP_RESULT_BYTES, MAX_STEPS_BYTES } from '../idempotency.constants';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { resolveOptions } from '../options/resolved-options';
import { callPolicy } from '../options/route-settings';
import { InMemoryIdempotencyRepository } from '../repository/in-memory-idempotency.repository';
import { stepEntryBytes } from '../response/step-value';
import { encodeTyped } from '../response/typed-value';
import { ManualClock } from '../testing/manual-clock';
import { ProtectedCall } from './protected-call';
import { HeldLease, StepJournal } from './step-journal';

/**
 * The journal's own rules, on the in-memory store: what it refuses before a step runs (the lease, a refused write,
 * the limits on sizes) and what it keeps count of. Resuming across processes and stores is in test/steps/.
 */
describe('StepJournal', () => {
  let clock: ManualClock;
  let repository: InMemoryIdempotencyRepository;
  let telemetry: IdempotencyTelemetry;
  let keys = 0;
  const LEASE_SECONDS = 60;

  beforeEach(() => {
    clock = new ManualClock(1_800_000_000_000);
    repository = new InMemoryIdempotencyRepository(clock);
    telemetry = new IdempotencyTelemetry();
  });
  afterEach(() => jest.restoreAllMocks());

  const newCall = (): ProtectedCall => ({
    recordKey: `journal-${++keys}`,
    fingerprint: 'fp',
    ...callPolicy(
      { pendingTtlSeconds: LEASE_SECONDS, retryAfterSeconds: 120 },
      resolveOptions({ clockSkewSeconds: 2 }),
    ),
  });

  /** Claims the call's key (resuming what an earlier run recorded) and opens a journal on the claim. */
  async function journalOf(call: ProtectedCall) {
    const claim = await repository.claim({ key: call.recordKey, fingerprint: call.fingerprint, leaseSeconds: 60 });
    if (!claim.claimed) throw new Error('not claimed');
    const lease: HeldLease = { leaseEndsAt: clock.nowSeconds() + LEASE_SECONDS, leaseLost: false };
    const claimOf = { claimToken: claim.claimToken, run: claim.run ?? 1, steps: claim.steps ?? [] };
    return { journal: new StepJournal({ repository, clock, telemetry }, call, claimOf, lease), lease, claim: claimOf };
  }

  /** A step's result of about `kilobytes` KB stored: random bytes, which compression does not shrink below their size. */
  const blob = (kilobytes: number) => randomBytes(kilobytes * 1024);

  it('refuses a step once the steps of the request would take over 64 KB together, and records nothing of it', async () => {
    const call = newCall();
    const { journal } = await journalOf(call);
    await journal.step('one', () => textOfStoredSize('one', 30_000));
    await journal.step('two', () => textOfStoredSize('two', 30_000));
    expect(call.steps?.bytes).toBe(60_000);
    await expect(journal.step('three', () => textOfStoredSize('three', 10_000))).rejects.toThrow(
      `IdempotencyContext.step("three"): with it, this request's steps would take 70000 bytes stored, over the limit of ${MAX_STEPS_BYTES} for all of them.`,
    );
    expect(call.steps?.bytes).toBe(60_000);
    const record = await repository.get({ key: call.recordKey });
    expect(record?.steps?.map(({ name }) => name)).toEqual(['one', 'two']);
  });

  it('takes steps of exactly 64 KB together', async () => {
    const call = newCall();
    const { journal } = await journalOf(call);
    await journal.step('one', () => textOfStoredSize('one', MAX_STEP_RESULT_BYTES));
    await journal.step('two', () => textOfStoredSize('two', MAX_STEPS_BYTES - MAX_STEP_RESULT_BYTES));
    expect(call.steps?.bytes).toBe(MAX_STEPS_BYTES);
    await expect(journal.step('three', () => '')).rejects.toThrow(RangeError);
  });

  it('counts the steps an earlier run recorded against the limits of the run that resumes', async () => {
    const call = newCall();
    const first = await journalOf(call);
    await first.journal.step('one', () => blob(25));
    await first.journal.step('two', () => blob(25));
    await repository.fail({ key: call.recordKey, claimToken: first.claim.claimToken, ttlSeconds: 60 });
    const resumed = newCall();
    resumed.recordKey = call.recordKey;
    const { journal, claim } = await journalOf(resumed);
    const recordedBytes = claim.steps.reduce((sum, step) => sum + (step.bytes ?? 0), 0);
    expect(recordedBytes).toBeGreaterThan(2 * 24 * 1024);
    expect(resumed.steps).toEqual({ bytes: recordedBytes, unfinished: 0 });
    expect(await journal.step('one', () => 'not run')).toEqual(expect.any(Buffer));
    await expect(journal.step('three', () => blob(25))).rejects.toThrow(/over the limit of 65536 for all of them/);
  });

  it('takes a step of exactly 32 KB stored, its name included, and refuses one byte more', async () => {
    const call = newCall();
    const { journal } = await journalOf(call);
    const exact = textOfStoredSize('exact', MAX_STEP_RESULT_BYTES);
    expect(await journal.step('exact', () => exact)).toBe(exact);
    const over = textOfStoredSize('over', MAX_STEP_RESULT_BYTES + 1);
    await expect(journal.step('over', () => over)).rejects.toThrow(
      `step("over"): it takes ${MAX_STEP_RESULT_BYTES + 1} bytes stored (its name and result), over the limit of ${MAX_STEP_RESULT_BYTES}.`,
    );
  });

  it('starts a step one second before the lease ends less the skew margin, and not at that second', async () => {
    const call = newCall();
    const { journal } = await journalOf(call);
    clock.advanceSeconds(LEASE_SECONDS - 2 - 1);
    expect(await journal.step('in time', () => 'ran')).toBe('ran');
    clock.advanceSeconds(1);
    const fn = jest.fn();
    await expect(journal.step('too late', fn)).rejects.toThrow(IdempotencyLeaseLostError);
    expect(fn).not.toHaveBeenCalled();
  });

  it('runs no further step once a step write was refused because another caller holds the key', async () => {
    const call = newCall();
    const { journal, lease } = await journalOf(call);
    clock.advanceSeconds(LEASE_SECONDS + 1); // the lease passed unseen (a pause); a successor claims the key
    const successor = await repository.claim({ key: call.recordKey, fingerprint: 'fp', leaseSeconds: 60 });
    expect(successor.claimed).toBe(true);
    lease.leaseEndsAt += LEASE_SECONDS + 1; // as if renewed, so only the refused write can tell
    const contexts: unknown[] = [];
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(function (this: Logger) {
      contexts.push((this as unknown as { context: unknown }).context);
    });
    const counted = jest.spyOn(telemetry, 'step');
    const refused = journal.step('charge', () => 'charged');
    await expect(refused).rejects.toThrow(IdempotencyLeaseLostError);
    await expect(refused).rejects.toMatchObject({ retryAfterSeconds: 63 }); // the successor's lease, the skew margin, a second
    expect(lease.leaseLost).toBe(true);
    expect(warn).toHaveBeenCalledWith({
      msg: 'step refused: its result was not recorded: another caller holds the key now',
      key: call.recordKey,
    });
    const next = jest.fn();
    await expect(journal.step('receipt', next)).rejects.toThrow(IdempotencyLeaseLostError);
    expect(next).not.toHaveBeenCalled();
    expect(warn).toHaveBeenLastCalledWith({
      msg: 'step refused: a step does not start once its caller may have lost the lease',
      key: call.recordKey,
    });
    expect(counted.mock.calls).toEqual([['lease_lost'], ['lease_lost']]);
    expect(contexts).toEqual(['Idempotency', 'Idempotency']);
  });

  it('refuses to record a step once its own call has completed the record, without calling the lease lost', async () => {
    const call = newCall();
    const { journal, lease, claim } = await journalOf(call);
    const response = { statusCode: 200, headers: {}, body: 'done' };
    await repository.complete({ key: call.recordKey, claimToken: claim.claimToken, response, ttlSeconds: 60 });
    const late = journal.step('late', () => 'too late');
    await expect(late).rejects.toThrow(
      'IdempotencyContext.step("late"): the call has already ended; its result was not recorded.',
    );
    await expect(late).rejects.not.toBeInstanceOf(IdempotencyLeaseLostError);
    expect(lease.leaseLost).toBe(false);
    expect(call.steps?.unfinished).toBe(1);
  });

  it('refuses a step of work its call left running before its function starts, once the call ended', async () => {
    const { journal } = await journalOf(newCall());
    journal.end();
    const fn = jest.fn();
    await expect(journal.step('late', fn)).rejects.toThrow(
      'IdempotencyContext.step("late"): the call has already ended; the step was not started.',
    );
    expect(fn).not.toHaveBeenCalled();
  });
});

/** A string whose step, named `name`, takes exactly `bytes` stored (as the journal measures it: name, entry, result). */
function textOfStoredSize(name: string, bytes: number): string {
  const stored = (text: string) =>
    stepEntryBytes(name, { statusCode: 200, headers: {}, body: encodeTyped(text, 'test'), bodyEncoding: 'typed' });
  for (let attempt = 0; attempt < 20; attempt++) {
    const random = randomBytes(bytes).toString('base64');
    let [low, high] = [0, random.length]; // the shortest prefix that takes at least `bytes`
    while (low < high) {
      const middle = (low + high) >> 1;
      if (stored(random.slice(0, middle)) < bytes) low = middle + 1;
      else high = middle;
    }
    if (stored(random.slice(0, low)) === bytes) return random.slice(0, low);
  }
  throw new Error(`no text of ${bytes} bytes stored found`);
}
