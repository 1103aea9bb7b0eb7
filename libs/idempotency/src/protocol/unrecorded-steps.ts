import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { SystemClock } from '../idempotency.clock';
import { DerivingRequest, derivedKeyOf } from '../keys/derived-key';
import { AttemptLease, runAttempts } from './step-attempts';
import { StepFunction, StepOptions, StepRunner, uniqueName } from './step-runner';

/** Steps without a claim hold no lease: their attempts are bounded only by their own limits. */
const NO_LEASE: AttemptLease = {
  gone: () => false,
  usableUntilMs: () => Number.POSITIVE_INFINITY,
  lost: () => new Error('no lease'),
};
const WALL_CLOCK = new SystemClock();

/**
 * Steps where nothing can be recorded: optimistic mode (no claim; warned once per route) and calls without a key. The
 * function runs every time, with the key it would have had (a random one without a record key).
 */
export class UnrecordedSteps implements StepRunner {
  private static readonly warned = new Set<string>();
  private readonly names = new Set<string>();

  constructor(
    private readonly request?: DerivingRequest,
    private readonly route?: () => string,
  ) {}

  async step<T>(name: string, fn: StepFunction<T>, options?: StepOptions<T>): Promise<T> {
    uniqueName(this.names, name);
    const route = this.route?.();
    if (route !== undefined && options?.semantics === 'at-most-once') {
      throw new Error(
        `IdempotencyContext.step(${JSON.stringify(name)}): an at-most-once step needs its start recorded, and mode ` +
          "'optimistic' records nothing before the handler's outcome; use mode 'lease' for this route.",
      );
    }
    if (route !== undefined && !UnrecordedSteps.warned.has(route)) {
      UnrecordedSteps.warned.add(route);
      new Logger('Idempotency').warn({
        msg: "steps are not recorded in mode 'optimistic' (there is no claim to record them on): each step runs on every attempt",
        route,
      });
    }
    const key = this.request === undefined ? randomBytes(32).toString('hex') : derivedKeyOf(this.request, name);
    const { retry, timeoutMs } = options ?? {};
    const run = {
      name,
      key,
      first: 1,
      retry,
      timeoutMs,
      lease: NO_LEASE,
      clock: WALL_CLOCK,
      beforeRetry: async () => {},
    };
    return (await runAttempts(fn, run)).value;
  }
}
