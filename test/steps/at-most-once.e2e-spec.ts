import { join } from 'node:path';
import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { ENGINES } from '../support/engines';
import { pastLease, scriptFleet } from '../support/script-fleet';

type Answer = { status: number; body: Record<string, unknown> } | 'connection lost';

/**
 * At-most-once steps across real processes, on each DynamoDB engine: a handler sends a mail through a relay that takes
 * no keys (at-most-once-app.script.ts), and its process is SIGKILLed inside the step. The client's retry, to another
 * process, waits out the lease (2 s). With a probe, the next run asks the relay and either records what it sent or sends
 * (attempt 2); without one, the key answers 500 step-outcome-unknown to every duplicate. The relay's file of mails says
 * what was sent: never twice. The tables have no TTL (DynamoDB Local's sweeper deletes a dead owner's record).
 */
describe.each(ENGINES)('at-most-once steps across processes (%s)', (engine) => {
  const fleet = scriptFleet({
    script: join(__dirname, 'at-most-once-app.script.ts'),
    name: 'at-most-once',
    file: 'EFFECTS_FILE',
    engine,
    ttl: false,
  });
  const instance = fleet.start;
  const mails = (to: string) => fleet.lines((line) => line.startsWith(`${to} `));
  const send = (url: string, path: string, key: string, to: string): Promise<Answer> =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ to }),
    }).then(
      async (response) => ({ status: response.status, body: (await response.json()) as Record<string, unknown> }),
      () => 'connection lost' as const, // with the process
    );
  /** The client's retry: 409 while the dead owner's lease runs, until another answer. */
  const retried = (url: string, path: string, key: string, to: string) => pastLease(() => send(url, path, key, to));
  const unique = (name: string) => `${name}-${engine}-${Date.now()}`;

  it('killed after the relay sent: the next run asks the probe, records what was sent, and sends nothing again', async () => {
    const [crashing, rescuing] = await Promise.all([instance({ CRASH: 'after-send' }), instance()]);
    const [key, to] = [unique('k'), unique('after@example.com')];
    expect(await send(crashing.url, '/mail/probed', key, to)).toBe('connection lost');
    await crashing.exited;
    const answer = await retried(rescuing.url, '/mail/probed', key, to);
    expect(answer).toEqual({
      status: 201,
      body: { to, sentBy: crashing.pid, attempts: [], answeredBy: rescuing.pid },
    });
    expect(mails(to)).toHaveLength(1);
  });

  it('killed before the relay sent: the probe says not sent, and the next run sends as attempt 2, once', async () => {
    const [crashing, rescuing] = await Promise.all([instance({ CRASH: 'before-send' }), instance()]);
    const [key, to] = [unique('k'), unique('before@example.com')];
    expect(await send(crashing.url, '/mail/probed', key, to)).toBe('connection lost');
    await crashing.exited;
    expect(mails(to)).toHaveLength(0);
    const answer = await retried(rescuing.url, '/mail/probed', key, to);
    expect(answer).toEqual({
      status: 201,
      body: { to, sentBy: rescuing.pid, attempts: [2], answeredBy: rescuing.pid },
    });
    expect(mails(to)).toEqual([expect.stringMatching(new RegExp(` ${rescuing.pid}$`))]);
  });

  it('killed inside the step without a probe: 500 step-outcome-unknown to every retry, in any process; the relay sent once', async () => {
    const [crashing, rescuing, other] = await Promise.all([instance({ CRASH: 'after-send' }), instance(), instance()]);
    const [key, to] = [unique('k'), unique('unknown@example.com')];
    expect(await send(crashing.url, '/mail', key, to)).toBe('connection lost');
    await crashing.exited;
    const answer = await retried(rescuing.url, '/mail', key, to);
    expect(answer).toMatchObject({
      status: 500,
      body: { type: ProblemType.stepOutcomeUnknown, step: 'send', attempt: 1 },
    });
    // Stored as the key's final failure: another process answers the same without running anything.
    expect(await send(other.url, '/mail', key, to)).toEqual(answer);
    expect(mails(to)).toHaveLength(1);
  });
});
