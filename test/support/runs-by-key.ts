import { Injectable } from '@nestjs/common';

/** How many times a handler ran per key, over every app instance of a test file (a provider the handlers inject). */
@Injectable()
export class RunsByKey {
  private static readonly counts = new Map<string, number>();

  count(key: string): void {
    RunsByKey.counts.set(key, RunsByKey.of(key) + 1);
  }

  static of(key: string): number {
    return RunsByKey.counts.get(key) ?? 0;
  }
}
