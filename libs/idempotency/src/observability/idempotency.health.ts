import { Injectable } from '@nestjs/common';
import { dynamoErrorCode } from '../dynamodb/dynamodb-errors';
import { IdempotencyRepository } from '../repository/idempotency.repository';

/** A result in the shape `@nestjs/terminus` reads (`{ [key]: { status, ...details } }`). */
export type IdempotencyHealthResult<Key extends string = string> = Record<
  Key,
  { status: 'up' | 'down'; [detail: string]: unknown }
>;

/**
 * A health indicator for the idempotency store, for `@nestjs/terminus`'s `HealthCheckService`:
 * `health.check([() => idempotencyHealth.isHealthy()])`. It reads one (absent) record with a consistent read,
 * which needs only the `GetItem` permission the module already has, and reports `down` with the DynamoDB error
 * code when the table is missing, throttled or unreachable. Terminus itself is not a dependency of this module.
 */
@Injectable()
export class IdempotencyHealthIndicator {
  constructor(private readonly repository: IdempotencyRepository) {}

  async isHealthy<Key extends string = 'idempotency_store'>(
    key: Key = 'idempotency_store' as Key,
  ): Promise<IdempotencyHealthResult<Key>> {
    const started = performance.now();
    const result = (status: 'up' | 'down', details: Record<string, unknown>) =>
      ({ [key]: { status, ...details } }) as IdempotencyHealthResult<Key>;
    try {
      await this.repository.get({ key: 'healthcheck#probe' });
      return result('up', { latencyMs: Math.round(performance.now() - started) });
    } catch (error) {
      const code = (error as { dynamoErrorCode?: string }).dynamoErrorCode ?? dynamoErrorCode(error);
      return result('down', { dynamo_error_code: code, message: (error as Error).message });
    }
  }
}
