import { RenewalTimer } from './renewal-timer';

/** On Jest's fake timers, which move `setTimeout` and `performance.now()` together. */
describe('RenewalTimer', () => {
  let timer: RenewalTimer;
  beforeEach(() => {
    jest.useFakeTimers();
    timer = new RenewalTimer();
  });
  afterEach(() => jest.useRealTimers());

  it('runs each entry every interval, all on one timer', () => {
    const runs: string[] = [];
    timer.every(1000, () => runs.push('a'));
    jest.advanceTimersByTime(500);
    timer.every(1000, () => runs.push('b'));
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(500);
    expect(runs).toEqual(['a']);
    jest.advanceTimersByTime(500);
    expect(runs).toEqual(['a', 'b']);
    jest.advanceTimersByTime(2000);
    expect(runs).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
    expect(jest.getTimerCount()).toBe(1);
  });

  it('fires for an entry due before the armed time', () => {
    const runs: string[] = [];
    timer.every(3000, () => runs.push('slow'));
    timer.every(500, () => runs.push('fast'));
    jest.advanceTimersByTime(1000);
    expect(runs).toEqual(['fast', 'fast']);
    jest.advanceTimersByTime(2000);
    expect(runs.filter((run) => run === 'slow')).toHaveLength(1);
    expect(runs.filter((run) => run === 'fast')).toHaveLength(6);
  });

  it('runs nothing once cancelled, and leaves no timer when no entry is left', () => {
    const runs: string[] = [];
    const a = timer.every(1000, () => runs.push('a'));
    const b = timer.every(1000, () => runs.push('b'));
    timer.cancel(a);
    jest.advanceTimersByTime(1000);
    expect(runs).toEqual(['b']);
    timer.cancel(b);
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(5000);
    expect(runs).toEqual(['b']);
  });

  it('lets an entry cancel itself or add another while it runs', () => {
    const runs: string[] = [];
    const once = timer.every(1000, () => {
      runs.push('once');
      timer.cancel(once);
      timer.every(1000, () => runs.push('next'));
    });
    jest.advanceTimersByTime(3000);
    expect(runs).toEqual(['once', 'next', 'next']);
  });

  it('arms again when its armed time has passed without firing (a lost timer)', () => {
    const runs: string[] = [];
    timer.every(1000, () => runs.push('a'));
    jest.clearAllTimers(); // the timer is gone, as a test's fake clock discarded with its timers would leave it
    jest.advanceTimersByTime(2000);
    timer.every(1000, () => runs.push('b'));
    jest.advanceTimersByTime(1000);
    expect(runs).toEqual(['a', 'b']);
  });
});
