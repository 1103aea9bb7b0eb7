import { invocationDeadlineSeconds, runBefore } from './invocation-deadline';

describe('the invocation deadline', () => {
  it('is the deadline of the invocation a call runs in, in epoch seconds rounded down, and none outside one', async () => {
    expect(invocationDeadlineSeconds()).toBeUndefined();
    const inside = await runBefore(1_800_000_123_999, async () => {
      await Promise.resolve(); // still the invocation's after an await
      return invocationDeadlineSeconds();
    });
    expect(inside).toBe(1_800_000_123);
    expect(invocationDeadlineSeconds()).toBeUndefined();
  });
});
