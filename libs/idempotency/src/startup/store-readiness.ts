import { Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { IdempotencyRepository } from '../repository/idempotency.repository';

/**
 * The store, checked once at application bootstrap (`failOnStartup`: a problem stops the application), and asked
 * once whether it has transactions, so `canCommitWith` is known before the first call. `startupCheck: false` skips
 * both: the first call that needs the answer asks.
 */
@Injectable()
export class StoreReadiness implements OnApplicationBootstrap {
  private readonly logger = new Logger('Idempotency');
  /** Whether the repository commits `commitWith` writes; undefined until it has answered. */
  private commitSupport?: boolean;

  constructor(
    private readonly repository: IdempotencyRepository,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.startupCheck) return;
    try {
      await this.repository.checkReady();
    } catch (error) {
      if (this.options.failOnStartup) throw error;
      this.logger.error({
        msg: 'the idempotency store cannot be used (failOnStartup: false, starting anyway)',
        error: String(error),
      });
      return;
    }
    await this.askCommitSupport().catch(() => undefined);
  }

  /**
   * Whether `commitWith` works on this store (asked once; a store fault leaves it to the next call). Once the store
   * has answered, the answer itself, without a promise: every protected call asks.
   */
  commitSupported(): boolean | Promise<boolean> {
    return this.commitSupport ?? this.askCommitSupport();
  }

  private async askCommitSupport(): Promise<boolean> {
    this.commitSupport ??= await this.repository.supportsCommitWith();
    return this.commitSupport;
  }
}
