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

  it('runs nothing once cancelled, and leaves no timer once the armed time has passed with no entry left', () => {
    const runs: string[] = [];
    const a = timer.every(1000, () => runs.push('a'));
    const b = timer.every(1000, () => runs.push('b'));
    timer.cancel(a);
    jest.advanceTimersByTime(1000);
    expect(runs).toEqual(['b']);
    timer.cancel(b);
    jest.advanceTimersByTime(1000);
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(5000);
    expect(runs).toEqual(['b']);
  });

  it('arms again on a clock that reads earlier than when it armed (a new fake clock: the old timer is lost)', () => {
    const runs: string[] = [];
    jest.advanceTimersByTime(60_000);
    timer.cancel(timer.every(1000, () => undefined)); // armed for 61 s on this clock, and left armed
    jest.useFakeTimers(); // a clock of its own, from 0 again, without the old timer
    timer.every(100_000, () => runs.push('a')); // due after the old armed time: only a new timer runs it
    jest.advanceTimersByTime(100_000);
    expect(runs).toEqual(['a']);
  });

  it('sets no timer per claim when each ends before the next begins (one request at a time)', () => {
    const timeouts = jest.spyOn(global, 'setTimeout');
    try {
      for (let claim = 0; claim < 100; claim++) timer.cancel(timer.every(1000, () => undefined));
      expect(timeouts).toHaveBeenCalledTimes(1);
      expect(jest.getTimerCount()).toBe(1);
      jest.advanceTimersByTime(1000);
      expect(jest.getTimerCount()).toBe(0); // fired with nothing due: not armed again
    } finally {
      timeouts.mockRestore();
    }
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
