import { Logger, LoggerService } from '@nestjs/common';

/**
 * What the module logs while a test runs: Nest's logger replaced by one that keeps each entry with its level.
 * Start it after a Nest module or app is built: building one applies its own logger setting. Apps booted by
 * `startApp` while it is started keep it as their logger.
 */
export class CapturedLogs {
  /** The logger of the capture started last and not stopped: what `startApp` gives the apps it boots. */
  static active: LoggerService | undefined;
  readonly entries: { level: string; message: unknown }[] = [];

  start(): void {
    const keep = (level: string) => (message: unknown) => this.entries.push({ level, message });
    const logger: LoggerService = {
      log: keep('log'),
      error: keep('error'),
      warn: keep('warn'),
      debug: keep('debug'),
      verbose: keep('verbose'),
    };
    Logger.overrideLogger(logger);
    CapturedLogs.active = logger;
  }

  /** Back to no logs (the test setup's default). */
  stop(): void {
    Logger.overrideLogger(false);
    CapturedLogs.active = undefined;
  }

  clear(): void {
    this.entries.length = 0;
  }

  /** The messages logged at one level, in order. */
  at(level: string): unknown[] {
    return this.entries.filter((entry) => entry.level === level).map((entry) => entry.message);
  }
}
