import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProblemType } from 'nestjs-dynamodb-idempotency';
import { scriptFleet } from '../support/script-fleet';

type Answer = { status: number; body: Record<string, unknown> } | 'connection lost';

/**
 * Step surgery with the built CLI on records a crashed process left (at-most-once-app.script.ts on dynalite: a handler
 * that sends a mail through a relay without keys, its process SIGKILLed inside the at-most-once step). `keys:steps`
 * lists the started step; `keys:resolve-step --done` settles it (the retry answers with the result given, sending
 * nothing); `--not-done` lets the retry send; `keys:restart --from-step` forgets the step. The relay's file of mails
 * says what was sent.
 */
describe('step surgery in the CLI, on records a crashed process left (dynalite)', () => {
  const fleet = scriptFleet({
    script: join(__dirname, 'at-most-once-app.script.ts'),
    name: 'surgery',
    file: 'EFFECTS_FILE',
    ttl: false,
    cli: true,
  });
  const instance = fleet.start;
  const mails = (to: string) => fleet.lines((line) => line.startsWith(`${to} `));
  const cli = fleet.cli;
  const send = (url: string, key: string, to: string): Promise<Answer> =>
    fetch(`${url}/mail`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ to }),
    }).then(
      async (response) => ({ status: response.status, body: (await response.json()) as Record<string, unknown> }),
      () => 'connection lost' as const,
    );
  /** A mail whose process died inside the at-most-once step (CRASH), its lease passed: the record it left. */
  async function crashed(crash: 'after-send' | 'before-send') {
    const [key, to] = [`k-${crash}-${Date.now()}`, `${crash}-${Date.now()}@example.com`];
    const dying = await instance({ CRASH: crash });
    expect(await send(dying.url, key, to)).toBe('connection lost');
    await dying.exited;
    await sleep(2500); // the dead owner's lease (2 s) ends
    return { key, to, select: ['--route', 'POST /mail', '--key', key] };
  }

  it('keys:steps lists the started step; --done settles it: the retry answers with the result given and sends nothing', async () => {
    const { key, to, select } = await crashed('after-send');
    const listed = await cli(['keys:steps', ...select]);
    expect(listed).toMatchObject({ code: 0 });
    expect(listed.stdout).toMatch(/started +"send" +attempt 1, .*not recorded, its outcome unknown/);
    expect(JSON.parse((await cli(['keys:steps', ...select, '--json'])).stdout)).toMatchObject({
      status: 'PENDING',
      steps: [{ name: 'send', state: 'started', attempt: 1 }],
    });
    const settled = await cli(['keys:resolve-step', 'send', ...select, '--done', '{"sentBy":"the relay’s log"}']);
    expect(settled).toMatchObject({ code: 0, stdout: expect.stringContaining('settled as done') });
    expect(settled.stderr).toMatch(/step surgery.*access key local/);
    const rescuer = await instance();
    expect(await send(rescuer.url, key, to)).toEqual({
      status: 201,
      body: { to, sentBy: 'the relay’s log', answeredBy: rescuer.pid },
    });
    expect(mails(to)).toHaveLength(1); // the dead process's only
  }, 60_000);

  it('an outcome-unknown key answers 500 until --not-done; then the retry sends, once', async () => {
    const { key, to, select } = await crashed('before-send');
    const rescuer = await instance();
    expect(await send(rescuer.url, key, to)).toMatchObject({
      status: 500,
      body: { type: ProblemType.stepOutcomeUnknown, step: 'send' },
    });
    const inspected = await cli(['keys:inspect', ...select]);
    expect(inspected.stdout).toContain('step outcome unknown: every request with this key is answered 500');
    expect(await cli(['keys:resolve-step', 'send', ...select, '--not-done'])).toMatchObject({ code: 0 });
    expect(await send(rescuer.url, key, to)).toMatchObject({ status: 201, body: { sentBy: rescuer.pid } });
    expect(mails(to)).toHaveLength(1);
  }, 60_000);

  it('keys:release keeps the start of a step a crashed process left: the retry answers outcome unknown, sending nothing; --force forgets it', async () => {
    const { key, to, select } = await crashed('after-send');
    const released = await cli(['keys:release', ...select]);
    expect(released).toMatchObject({ code: 0, stdout: expect.stringContaining('1 step(s) recorded or started') });
    const rescuer = await instance();
    const unknown = { status: 500, body: { type: ProblemType.stepOutcomeUnknown, step: 'send' } };
    expect(await send(rescuer.url, key, to)).toMatchObject(unknown);
    // Released again, now an unknown outcome: the next run meets the start once more (no probe: unknown again).
    const again = await cli(['keys:release', ...select]);
    expect(again).toMatchObject({ code: 0, stdout: expect.stringContaining('keys:resolve-step settles it') });
    expect(await send(rescuer.url, key, to)).toMatchObject(unknown);
    expect(mails(to)).toHaveLength(1);
    expect(await cli(['keys:release', ...select, '--force'])).toMatchObject({
      code: 0,
      stdout: expect.stringContaining('forgotten and run again'),
    });
    expect(await send(rescuer.url, key, to)).toMatchObject({ status: 201, body: { sentBy: rescuer.pid } });
    expect(mails(to)).toHaveLength(2); // as the operator forced
  }, 60_000);

  it('keys:restart --from-step forgets the step and releases the key; a step that is not there is refused, exit 1', async () => {
    const { key, to, select } = await crashed('after-send');
    const unknown = await cli(['keys:restart', ...select, '--from-step', 'charge']);
    expect(unknown).toMatchObject({ code: 1, stdout: expect.stringContaining('the request has no step "charge"') });
    expect(await cli(['keys:restart', ...select, '--from-step', 'send'])).toMatchObject({ code: 0 });
    const rescuer = await instance();
    expect(await send(rescuer.url, key, to)).toMatchObject({ status: 201, body: { sentBy: rescuer.pid } });
    expect(mails(to)).toHaveLength(2); // as the operator asked: the step ran again
  }, 60_000);
});
