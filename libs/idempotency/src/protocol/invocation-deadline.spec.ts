import { withLambdaContext } from '../lambda/lambda-invocation';
import { hostname } from 'node:os';
import { claimHolder, heldByInvocation, invocationDeadlineSeconds, runBefore } from './invocation-deadline';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the invocation deadline', () => {
  it("names a claim's holder: the Lambda request id inside an invocation, else this host and process", async () => {
    expect(claimHolder()).toBe(`${hostname()}:${process.pid}`);
    const handler = withLambdaContext(async () => {
      await Promise.resolve();
      return claimHolder();
    });
    expect(await handler({}, { getRemainingTimeInMillis: () => 5000, awsRequestId: 'c0ffee-1' })).toBe(
      'lambda:c0ffee-1',
    );
    expect(await handler({}, { getRemainingTimeInMillis: () => 5000 })).toBe(`${hostname()}:${process.pid}`);
  });

  it('is the deadline of the invocation a call runs in, in epoch seconds rounded down, and none outside one', async () => {
    expect(invocationDeadlineSeconds()).toBeUndefined();
    const inside = await runBefore(1_800_000_123_999, async () => {
      await Promise.resolve(); // still the invocation's after an await
      return invocationDeadlineSeconds();
    });
    expect(inside).toBe(1_800_000_123);
    expect(invocationDeadlineSeconds()).toBeUndefined();
  });

  it('ends the invocation only once the calls it started have settled, with the work’s own result', async () => {
    const events: string[] = [];
    const result = await runBefore(Date.now() + 5000, async () => {
      void heldByInvocation(sleep(50).then(() => events.push('call settled')));
      return 'answer';
    });
    events.push('invocation ended');
    expect(result).toBe('answer');
    expect(events).toEqual(['call settled', 'invocation ended']);
  });

  it('waits for held calls when the work throws too, and rethrows its error', async () => {
    const events: string[] = [];
    const ended = runBefore(Date.now() + 5000, async () => {
      void heldByInvocation(sleep(50).then(() => events.push('call settled')));
      throw new Error('handler failed');
    });
    await expect(ended).rejects.toThrow('handler failed');
    expect(events).toEqual(['call settled']);
  });

  it('stops waiting at the deadline (Lambda ends the invocation then anyway)', async () => {
    let settled = false;
    const held = sleep(2000).then(() => (settled = true));
    await runBefore(Date.now() + 100, async () => void heldByInvocation(held));
    expect(settled).toBe(false);
  });

  it('outside an invocation, holds nothing', async () => {
    const call = Promise.resolve(1);
    expect(heldByInvocation(call)).toBe(call);
  });
});

describe('withLambdaContext', () => {
  it.each([
    ['no context', undefined],
    ['an empty context', {}],
    ['a remaining time that is not a number', { getRemainingTimeInMillis: () => 'soon' }],
    ['a remaining time of NaN', { getRemainingTimeInMillis: () => NaN }],
    [
      'a remaining time that throws',
      {
        getRemainingTimeInMillis: () => {
          throw new Error('no');
        },
      },
    ],
  ])('with %s, runs the handler with ordinary leases (no deadline)', async (_name, context) => {
    const handler = withLambdaContext(async () => invocationDeadlineSeconds());
    await expect(handler({}, context as never)).resolves.toBeUndefined();
  });

  it('with a finite remaining time, calls know the deadline', async () => {
    const before = Math.floor((Date.now() + 10_000) / 1000);
    const handler = withLambdaContext(async () => invocationDeadlineSeconds());
    const deadline = await handler({}, { getRemainingTimeInMillis: () => 10_000 });
    expect(deadline).toBeGreaterThanOrEqual(before);
    expect(deadline).toBeLessThanOrEqual(before + 1);
  });
});
