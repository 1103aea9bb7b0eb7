import { Injectable } from '@nestjs/common';

/**
 * Handlers that wait until the test lets them finish, counted per key over every app instance of a test file: the
 * test decides when the work ends, instead of racing a sleep.
 */
@Injectable()
export class Gates {
  private static readonly runs = new Map<string, number>();
  private static readonly open = new Map<string, () => void>();

  /** Counts a run of `key` and waits until `release(key)`. */
  async pass(key: string): Promise<number> {
    const run = (Gates.runs.get(key) ?? 0) + 1;
    Gates.runs.set(key, run);
    await new Promise<void>((resolve) => Gates.open.set(key, resolve));
    return run;
  }

  static runsOf(key: string): number {
    return Gates.runs.get(key) ?? 0;
  }

  /** Resolves once a handler for `key` waits at its gate. */
  static async reached(key: string, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!Gates.open.has(key)) {
      if (Date.now() > deadline) throw new Error(`no handler reached the gate of ${key}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  static release(key: string): void {
    const open = Gates.open.get(key);
    if (!open) throw new Error(`no handler waits at the gate of ${key}`);
    Gates.open.delete(key);
    open();
  }
}
