import { Injectable } from '@nestjs/common';

/**
 * Handlers that wait until the test lets them finish, counted per key over every app instance of a test file: the
 * test decides when the work ends, instead of racing a sleep. Each run of a key has its own gate.
 */
@Injectable()
export class Gates {
  private static readonly runs = new Map<string, number>();
  private static readonly open = new Map<string, () => void>();

  /** Counts a run of `key` and waits until `release(key, run)`. */
  async pass(key: string): Promise<number> {
    const run = (Gates.runs.get(key) ?? 0) + 1;
    Gates.runs.set(key, run);
    await new Promise<void>((resolve) => Gates.open.set(`${key}#${run}`, resolve));
    return run;
  }

  static runsOf(key: string): number {
    return Gates.runs.get(key) ?? 0;
  }

  /** Resolves once the `run`th run of `key` waits at its gate. */
  static async reached(key: string, run = 1, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!Gates.open.has(`${key}#${run}`)) {
      if (Date.now() > deadline) throw new Error(`run ${run} of ${key} did not reach its gate`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** Lets the `run`th run of `key` finish. */
  static release(key: string, run = 1): void {
    const open = Gates.open.get(`${key}#${run}`);
    if (!open) throw new Error(`run ${run} of ${key} does not wait at its gate`);
    Gates.open.delete(`${key}#${run}`);
    open();
  }
}
