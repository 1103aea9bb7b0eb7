import fc from 'fast-check';
import { preferredWait } from './outcome-door.interceptor';

describe('preferredWait (the Prefer header of an outcome door, RFC 7240)', () => {
  it('reads wait=N among other preferences, in one header or several, bounded by the door', () => {
    expect(preferredWait('wait=5', 10)).toBe(5);
    expect(preferredWait('respond-async, wait=30', 10)).toBe(10);
    expect(preferredWait(['handling=lenient', 'WAIT = "7"'], 10)).toBe(7);
    expect(preferredWait('return=minimal', 10)).toBeUndefined();
    expect(preferredWait(undefined, 10)).toBeUndefined();
    expect(preferredWait('nowait=5', 10)).toBeUndefined();
  });

  it('whatever a client sends, the wait is a whole number of seconds from 0 to the bound, or none', () => {
    const header = fc.oneof(
      fc.string(),
      fc.array(fc.string()),
      fc.constantFrom('wait=-1', 'wait=1e9', 'wait=NaN', 'wait=99999999999999999999', 'wait=0x10'),
      fc.integer().map((n) => `wait=${n}`),
      fc.anything(),
    );
    fc.assert(
      fc.property(header, fc.integer({ min: 0, max: 60 }), (prefer, max) => {
        const wait = preferredWait(prefer, max);
        return wait === undefined || (Number.isInteger(wait) && wait >= 0 && wait <= max);
      }),
    );
  });
});
