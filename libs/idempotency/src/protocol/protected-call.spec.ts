import { leaseSecondsAt } from './protected-call';

describe('leaseSecondsAt', () => {
  it("is the call's lease outside an invocation", () => {
    expect(leaseSecondsAt({ leaseSeconds: 30 }, 1_000)).toBe(30);
  });

  it("is cut at an invocation's deadline, and 0 once it has passed", () => {
    expect(leaseSecondsAt({ leaseSeconds: 30, deadline: 1_100 }, 1_000)).toBe(30);
    expect(leaseSecondsAt({ leaseSeconds: 30, deadline: 1_010 }, 1_000)).toBe(10);
    expect(leaseSecondsAt({ leaseSeconds: 30, deadline: 1_000 }, 1_000)).toBe(0);
    expect(leaseSecondsAt({ leaseSeconds: 30, deadline: 990 }, 1_000)).toBe(0);
  });
});
