import { IdempotencyLeaseLostError } from '../errors/idempotency.errors';
import { StepOutcomeUnknownError } from '../errors/step-errors';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { resolveOptions } from '../options/resolved-options';
import { callPolicy } from '../options/route-settings';
import { InMemoryIdempotencyRepository } from '../repository/in-memory-idempotency.repository';
import { ManualClock } from '../testing/manual-clock';
import { derivedKeyOf } from '../keys/derived-key';
import { ProtectedCall } from './protected-call';
import { HeldLease, StepJournal } from './step-journal';
import { StepTimeoutError } from './step-attempts';
import { checkStepOptions, OUTCOME_UNKNOWN, StepOptions } from './step-runner';
import { UnrecordedSteps } from './unrecorded-steps';

/**
 * A step's options in the journal, on the in-memory store. At-most-once steps (`semantics: 'at-most-once'`): the start
 * recorded before the function runs, and what a later run does when it finds the start without a result (the probe's
 * three answers, no probe); across processes and on DynamoDB: test/steps/at-most-once.e2e-spec.ts. Retries and time
 * limits within a run (`retry`, `timeoutMs`), never past the lease.
 */
describe('step options', () => {
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

  const newCall = (recordKey = `at-most-once-${++keys}`): ProtectedCall => ({
    recordKey,
    fingerprint: 'fp',
    ...callPolicy({ pendingTtlSeconds: LEASE_SECONDS }, resolveOptions({ clockSkewSeconds: 2 })),
  });

  /** A run of the call's request: its claim (resuming what earlier runs left) and a journal on it. */
  async function run(call: ProtectedCall) {
    const claim = await repository.claim({ key: call.recordKey, fingerprint: 'fp', leaseSeconds: LEASE_SECONDS });
    if (!claim.claimed) throw new Error('not claimed');
    const { claimToken, run = 1, steps = [], startedSteps = [] } = claim;
    const lease: HeldLease = { leaseEndsAt: clock.nowSeconds() + LEASE_SECONDS, leaseLost: false };
    const journal = new StepJournal(
      { repository, clock, telemetry },
      call,
      { claimToken, run, steps, startedSteps },
      lease,
    );
    return { journal, claimToken, lease };
  }

  /** A run that started the step and died inside it: the start recorded, no result, the lease passed. */
  async function interrupted(call: ProtectedCall, name = 'send') {
    const { journal } = await run(call);
    void journal.step(name, () => new Promise(() => undefined), { semantics: 'at-most-once' });
    await new Promise((resolve) => setImmediate(resolve)); // its start is written
    clock.advanceSeconds(LEASE_SECONDS + 3);
  }

  const atMostOnce = <T>(probe?: StepOptions<T>['probe']): StepOptions<T> => ({ semantics: 'at-most-once', probe });

  it('records the start before the function runs, with attempt 1, and the result in its place', async () => {
    const call = newCall();
    const { journal } = await run(call);
    let seen: unknown;
    const value = await journal.step(
      'send',
      async ({ attempt }) => {
        seen = (await repository.get({ key: call.recordKey }))?.startedSteps;
        return { sent: attempt };
      },
      atMostOnce(),
    );
    expect(value).toEqual({ sent: 1 });
    expect(seen).toEqual([{ name: 'send', attempt: 1, run: 1, startedAt: clock.nowSeconds() }]);
    const record = await repository.get({ key: call.recordKey });
    expect(record?.startedSteps).toBeUndefined();
    expect(record?.steps).toMatchObject([{ name: 'send', attempt: 1, run: 1 }]);
  });

  it('without a probe, a run that finds the step started throws StepOutcomeUnknownError and does not run it', async () => {
    const call = newCall();
    await interrupted(call);
    const { journal } = await run(call);
    const counted = jest.spyOn(telemetry, 'step');
    const fn = jest.fn();
    const refused = journal.step('send', fn, atMostOnce());
    await expect(refused).rejects.toThrow(StepOutcomeUnknownError);
    await expect(refused).rejects.toMatchObject({
      step: 'send',
      attempt: 1,
      key: derivedKeyOf(call, 'send'),
      outcome: 'step_outcome_unknown',
    });
    expect(fn).not.toHaveBeenCalled();
    expect(counted.mock.calls).toEqual([['outcome_unknown']]);
  });

  it('a probe that finds the effect: its value is recorded as the result of the interrupted attempt, the function never runs', async () => {
    const call = newCall();
    await interrupted(call);
    const { journal } = await run(call);
    const counted = jest.spyOn(telemetry, 'step');
    const probe = jest.fn(() => ({ sent: 'found' }));
    const fn = jest.fn();
    expect(await journal.step('send', fn, atMostOnce(probe))).toEqual({ sent: 'found' });
    expect(probe).toHaveBeenCalledWith({ key: derivedKeyOf(call, 'send'), attempt: 1 });
    expect(fn).not.toHaveBeenCalled();
    expect(counted.mock.calls).toEqual([['probed_done']]);
    const record = await repository.get({ key: call.recordKey });
    expect(record?.steps).toMatchObject([{ name: 'send', attempt: 1, run: 2 }]); // recorded by run 2
    expect(record?.startedSteps).toBeUndefined();
  });

  it('a probe that says it did not happen: the function runs as attempt 2, its start recorded again first', async () => {
    const call = newCall();
    await interrupted(call);
    const { journal } = await run(call);
    let started: unknown;
    const value = await journal.step(
      'send',
      async ({ attempt }) => {
        started = (await repository.get({ key: call.recordKey }))?.startedSteps;
        return attempt;
      },
      atMostOnce(() => undefined),
    );
    expect(value).toBe(2);
    expect(started).toEqual([expect.objectContaining({ name: 'send', attempt: 2, run: 2 })]);
  });

  it('a probe that cannot tell (OUTCOME_UNKNOWN) is an unknown outcome; one that throws propagates; neither runs the function', async () => {
    const call = newCall();
    await interrupted(call);
    const fn = jest.fn();
    const cannotTell = await run(call);
    await expect(
      cannotTell.journal.step(
        'send',
        fn,
        atMostOnce(async () => OUTCOME_UNKNOWN),
      ),
    ).rejects.toThrow(StepOutcomeUnknownError);
    await repository.fail({ key: call.recordKey, claimToken: cannotTell.claimToken, ttlSeconds: 60 });
    const throwing = await run(call);
    const outage = new Error('the relay is down');
    await expect(
      throwing.journal.step(
        'send',
        fn,
        atMostOnce(() => Promise.reject(outage)),
      ),
    ).rejects.toBe(outage);
    expect(fn).not.toHaveBeenCalled();
    // The start is still there: the next run asks again.
    expect((await repository.get({ key: call.recordKey }))?.startedSteps).toMatchObject([{ name: 'send', attempt: 1 }]);
  });

  it('a function that throws leaves its start: the next run does not run it blindly', async () => {
    const call = newCall();
    const first = await run(call);
    const timeout = new Error('the relay timed out (did it send?)');
    await expect(first.journal.step('send', () => Promise.reject(timeout), atMostOnce())).rejects.toBe(timeout);
    await repository.fail({ key: call.recordKey, claimToken: first.claimToken, ttlSeconds: 60 });
    const fn = jest.fn();
    await expect((await run(call)).journal.step('send', fn, atMostOnce())).rejects.toThrow(StepOutcomeUnknownError);
    expect(fn).not.toHaveBeenCalled();
  });

  it('a run that lost the key never starts the function: its start write is refused', async () => {
    const call = newCall();
    const { journal, lease } = await run(call);
    clock.advanceSeconds(LEASE_SECONDS + 3);
    const successor = await repository.claim({ key: call.recordKey, fingerprint: 'fp', leaseSeconds: LEASE_SECONDS });
    expect(successor.claimed).toBe(true);
    lease.leaseEndsAt += LEASE_SECONDS + 3; // as if renewed, so only the refused start can tell
    const fn = jest.fn();
    await expect(journal.step('send', fn, atMostOnce())).rejects.toThrow(IdempotencyLeaseLostError);
    expect(fn).not.toHaveBeenCalled();
    expect(lease.leaseLost).toBe(true);
  });

  it('costs one write more than an at-least-once step: the start', async () => {
    const call = newCall();
    const { journal } = await run(call);
    const starts = jest.spyOn(repository, 'startStep');
    const records = jest.spyOn(repository, 'recordStep');
    await journal.step('one', () => 1);
    await journal.step('two', () => 2, atMostOnce());
    expect([starts.mock.calls.length, records.mock.calls.length]).toEqual([1, 2]);
  });

  const transient = Object.assign(new Error('503 from the provider'), { transient: true });
  const retry = (attempts: number, initialMs = 1) => ({
    attempts,
    retryable: (error: unknown) => (error as { transient?: boolean }).transient === true,
    backoff: { initialMs },
  });

  it('retries an error marked retryable within the run, with the same key, and records the attempt that returned', async () => {
    const call = newCall();
    const { journal } = await run(call);
    const seen: [string, number][] = [];
    const value = await journal.step(
      'charge',
      ({ key, attempt }) => {
        seen.push([key, attempt]);
        if (attempt < 3) throw transient;
        return 'charged';
      },
      { retry: retry(3) },
    );
    expect(value).toBe('charged');
    const key = derivedKeyOf(call, 'charge');
    expect(seen).toEqual([
      [key, 1],
      [key, 2],
      [key, 3],
    ]);
    expect((await repository.get({ key: call.recordKey }))?.steps).toMatchObject([{ name: 'charge', attempt: 3 }]);
  });

  it('ends at an error not marked retryable, and at the last attempt with its error', async () => {
    const { journal } = await run(newCall());
    const final = new Error('card declined');
    const declined = jest.fn(() => Promise.reject(final));
    await expect(journal.step('declined', declined, { retry: retry(5) })).rejects.toBe(final);
    expect(declined).toHaveBeenCalledTimes(1);
    const flaky = jest.fn(() => Promise.reject(transient));
    await expect(journal.step('flaky', flaky, { retry: retry(2) })).rejects.toBe(transient);
    expect(flaky).toHaveBeenCalledTimes(2);
  });

  it('records the start of each retry of an at-most-once step, as its attempt', async () => {
    const call = newCall();
    const { journal } = await run(call);
    const starts = jest.spyOn(repository, 'startStep');
    await journal.step('send', ({ attempt }) => (attempt < 2 ? Promise.reject(transient) : 'sent'), {
      ...atMostOnce(),
      retry: retry(2),
    });
    expect(starts.mock.calls.map(([{ step }]) => step.attempt)).toEqual([1, 2]);
  });

  it('stops an attempt at its time limit: its signal fires with StepTimeoutError, which the step answers or retries', async () => {
    const { journal } = await run(newCall());
    const reasons: unknown[] = [];
    const hangs = ({ signal }: { signal: AbortSignal }) =>
      new Promise<never>(() => signal.addEventListener('abort', () => reasons.push(signal.reason)));
    await expect(journal.step('slow', hangs, { timeoutMs: 20 })).rejects.toThrow(new StepTimeoutError('slow', 20));
    expect(reasons).toEqual([expect.any(StepTimeoutError)]);
    const retried = await journal.step(
      'slow then fast',
      ({ attempt, signal }) => (attempt === 1 ? hangs({ signal }) : 'fast'),
      { timeoutMs: 20, retry: { ...retry(2), retryable: (error) => error instanceof StepTimeoutError } },
    );
    expect(retried).toBe('fast');
  });

  it('fires an attempt’s signal with IdempotencyLeaseLostError once the lease is lost, and answers lease-lost', async () => {
    const { journal, lease } = await run(newCall());
    let reason: unknown;
    const step = journal.step('long', ({ signal }) => {
      setTimeout(() => (lease.leaseLost = true), 10); // a renewal refused meanwhile
      return new Promise((_, reject) =>
        signal.addEventListener('abort', () => {
          reason = signal.reason;
          reject(signal.reason);
        }),
      );
    });
    await expect(step).rejects.toThrow(IdempotencyLeaseLostError);
    expect(reason).toBeInstanceOf(IdempotencyLeaseLostError);
  });

  it('does not start a retry that could not finish before the lease ends: the error stands', async () => {
    const { journal } = await run(newCall());
    clock.advanceSeconds(LEASE_SECONDS - 2 - 3); // 3 s of the lease left, less the skew margin
    const fn = jest.fn(() => Promise.reject(transient));
    const slowRetry = { ...retry(3, 1000), backoff: { initialMs: 1000 } };
    await expect(journal.step('charge', fn, { retry: slowRetry, timeoutMs: 2500 })).rejects.toBe(transient);
    expect(fn).toHaveBeenCalledTimes(1);
  });

  it("refuses an at-most-once step in mode 'optimistic' (nothing is recorded before the outcome), without running it", async () => {
    const fn = jest.fn();
    const optimistic = new UnrecordedSteps({ recordKey: 'r', fingerprint: 'fp' }, () => 'POST /mail');
    await expect(optimistic.step('send', fn, { semantics: 'at-most-once' })).rejects.toThrow(
      "an at-most-once step needs its start recorded, and mode 'optimistic' records nothing",
    );
    expect(fn).not.toHaveBeenCalled();
  });

  it.each([
    [{ semantics: 'exactly-once' }, "semantics is 'at-least-once' or 'at-most-once', not exactly-once"],
    [{ semantics: 'at-most-once', probe: 'yes' }, 'probe must be a function'],
    [{ probe: () => undefined }, "a probe is only asked for an at-most-once step (semantics: 'at-most-once')"],
    [null, 'options must be an object'],
    [{ timeoutMs: Number.NaN }, `timeoutMs is a whole number of ms from 1 to ${2 ** 31 - 1}, not NaN`],
    [{ timeoutMs: 0 }, `timeoutMs is a whole number of ms from 1 to ${2 ** 31 - 1}, not 0`],
    [
      { retry: { attempts: 0, retryable: (): boolean => true } },
      'retry.attempts is a whole number from 1 to 100, not 0',
    ],
    [{ retry: { attempts: 2 } }, 'retry.retryable must be a function (which errors are worth another attempt)'],
    [
      { retry: { attempts: 2, retryable: (): boolean => true, backoff: { factor: Number.NaN } } },
      `retry.backoff.factor is a number from 1 to ${2 ** 31 - 1}, not NaN`,
    ],
  ])('refuses the options %p with a TypeError', (options, message) => {
    expect(() => checkStepOptions('send', options)).toThrow(
      new TypeError(`IdempotencyContext.step("send"): ${message}.`),
    );
  });
});
