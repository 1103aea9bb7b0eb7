import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { OUTCOME_CHANNEL } from '../observability/outcome-events';
import { ManualClock } from '../testing/manual-clock';
import { InMemoryIdempotencyRepository } from '../repository/in-memory-idempotency.repository';
import { IdempotencyAdmin } from './idempotency-admin';

/**
 * Step surgery through `IdempotencyAdmin.reviseSteps`, on the in-memory store: what it forgets, what it refuses, and
 * that it writes only over the record as it read it. On DynamoDB from the CLI: test/steps/step-surgery.e2e-spec.ts.
 */
describe('IdempotencyAdmin.reviseSteps', () => {
  let clock: ManualClock;
  let repository: InMemoryIdempotencyRepository;
  let admin: IdempotencyAdmin;
  let keys = 0;
  const result = (value: unknown) => ({ statusCode: 200, headers: {}, body: value, bodyEncoding: 'typed' as const });

  beforeEach(() => {
    clock = new ManualClock(1_800_000_000_000);
    repository = new InMemoryIdempotencyRepository(clock);
    admin = new IdempotencyAdmin({ repository, clock });
  });

  /** A record whose run recorded `recorded` (in that order) and started `started`, then died: its lease has passed. */
  async function crashed(recorded: string[], started: string[] = []) {
    const key = `surgery-${++keys}`;
    const claim = await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 30 });
    if (!claim.claimed) throw new Error('not claimed');
    const { claimToken } = claim;
    for (const [seq, name] of recorded.entries()) {
      await repository.recordStep({ key, claimToken, step: { name, result: result(name), attempt: 1, run: 1, seq } });
    }
    for (const name of started) await repository.startStep({ key, claimToken, step: { name, attempt: 1, run: 1 } });
    clock.advanceSeconds(31);
    return { selector: { recordKey: key }, key, claimToken };
  }

  it('restarts from a step: forgets it and every step recorded after it, keeps those before and other starts, releases', async () => {
    const { selector, key } = await crashed(['reserve', 'charge', 'ship', 'receipt'], ['mail']);
    const events: unknown[] = [];
    const listen = (event: unknown) => events.push(event);
    subscribe(OUTCOME_CHANNEL, listen);
    const done = await admin.reviseSteps(selector, { restartFrom: 'charge' }, { operator: 'access key AKIATEST' });
    unsubscribe(OUTCOME_CHANNEL, listen);
    expect(events).toEqual([
      expect.objectContaining({
        outcome: 'step-surgery',
        transport: 'admin',
        operation: 'restart from step charge',
        recordKey: key,
        operator: 'access key AKIATEST',
      }),
    ]);
    expect(done).toMatchObject({ done: true, note: expect.stringContaining('"charge", "ship", "receipt" forgotten') });
    const record = await repository.get({ key });
    expect(record).toMatchObject({ status: 'FAILED', startedSteps: [{ name: 'mail' }] });
    expect(record?.steps?.map((step) => step.name)).toEqual(['reserve']);
  });

  it('settles a started step as done (its result recorded in its place) or not done (its start forgotten)', async () => {
    const first = await crashed(['reserve'], ['mail']);
    await admin.reviseSteps(first.selector, { resolve: 'mail', resolution: { done: { id: 'm-1' } } });
    const settled = await repository.get({ key: first.key });
    expect(settled?.startedSteps).toBeUndefined();
    expect(settled?.steps?.map((step) => [step.name, step.result.body, step.attempt])).toEqual([
      ['reserve', 'reserve', 1],
      ['mail', { id: 'm-1' }, 1],
    ]);
    const second = await crashed([], ['mail']);
    await admin.reviseSteps(second.selector, { resolve: 'mail', resolution: { notDone: true } });
    expect(await repository.get({ key: second.key })).toMatchObject({ status: 'FAILED', steps: [] });
  });

  it('refuses a live lease, a completed record, a step that is not there, and a recorded step to resolve', async () => {
    const live = await repository.claim({ key: 'surgery-live', fingerprint: 'fp', leaseSeconds: 30 });
    if (!live.claimed) throw new Error('not claimed');
    await repository.startStep({
      key: 'surgery-live',
      claimToken: live.claimToken,
      step: { name: 'mail', attempt: 1, run: 1 },
    });
    const refusedLive = await admin.reviseSteps({ recordKey: 'surgery-live' }, { restartFrom: 'mail' });
    expect(refusedLive).toMatchObject({ done: false, reason: 'refused', note: expect.stringContaining('live lease') });

    const done = await crashed(['charge']);
    const { claimToken } = (await repository.claim({ key: done.key, fingerprint: 'fp', leaseSeconds: 30 })) as {
      claimToken: string;
    };
    await repository.complete({ key: done.key, claimToken, response: result('ok'), ttlSeconds: 60 });
    expect(await admin.reviseSteps(done.selector, { restartFrom: 'charge' })).toMatchObject({
      done: false,
      note: expect.stringContaining('COMPLETED'),
    });

    const other = await crashed(['charge'], ['mail']);
    expect(await admin.reviseSteps(other.selector, { restartFrom: 'ship' })).toMatchObject({
      done: false,
      note: 'the request has no step "ship": it has "charge" (recorded), "mail" (started, not recorded)',
    });
    expect(await admin.reviseSteps(other.selector, { resolve: 'charge', resolution: { notDone: true } })).toMatchObject(
      {
        done: false,
        note: expect.stringContaining('no started, unrecorded step "charge"'),
      },
    );
  });

  it('keeps the in-memory store’s eviction order: a revised FAILED record is not listed twice (its key claimed again survives)', async () => {
    const write = async (other: string) => {
      const claim = await repository.claim({ key: other, fingerprint: 'fp', leaseSeconds: 30 });
      if (!claim.claimed) return;
      await repository.complete({ key: other, claimToken: claim.claimToken, response: result(other), ttlSeconds: 100 });
    };
    const { selector, key, claimToken } = await crashed(['charge']);
    await repository.fail({ key, claimToken, ttlSeconds: 60 });
    for (const other of ['b1', 'b2', 'b3']) await write(other); // finished records between its two writes
    await admin.reviseSteps(selector, { restartFrom: 'charge' }); // FAILED, in the write order already
    clock.advanceSeconds(3600);
    await write('other'); // evicts the expired records at the front, two per write, as every write does
    expect((await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 30 })).claimed).toBe(true);
    await write('after');
    expect(await repository.get({ key })).toMatchObject({ status: 'PENDING' });
  });

  it('writes nothing over a record that changed since it was read (a successor took the key over)', async () => {
    const { selector, key } = await crashed(['charge']);
    const get = repository.get.bind(repository);
    jest.spyOn(repository, 'get').mockImplementationOnce(async (location) => {
      const read = await get(location);
      await repository.claim({ key, fingerprint: 'fp', leaseSeconds: 30 }); // the successor, between read and write
      return read;
    });
    expect(await admin.reviseSteps(selector, { restartFrom: 'charge' })).toMatchObject({
      done: false,
      reason: 'changed',
    });
    expect((await repository.get({ key }))?.steps?.map((step) => step.name)).toEqual(['charge']);
  });
});
