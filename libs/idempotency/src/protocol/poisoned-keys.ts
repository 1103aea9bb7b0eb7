import { Logger } from '@nestjs/common';
import { IdempotencyKeyPoisonedError, IdempotencyLeaseLostError } from '../errors/idempotency.errors';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRecord, StoredResponse } from '../repository/idempotency.record';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { retryThroughStoreFaults } from './outcome-recorder';
import { ProtectedCall } from './protected-call';
import { WonClaim } from './single-flight';

/**
 * Poison keys (`maxCrashedOwners`): a request whose handler takes its process down is retried by its client, and each
 * retry after the lease takes the key over on another instance, which dies the same way. The claim that takes a lease
 * over learns, from the record it replaced, the owners that crashed since the record's last clean end (its own
 * conditional write counted them: no extra call); once they reach the cap it does not run the handler, but stores the
 * key as a final failure, answered to every duplicate as 500 `key-poisoned`.
 */

const logger = new Logger('Idempotency');

/** The owners that crashed on the key, when a won claim's takeover reaches the call's cap; else undefined. */
export function crashedTooOften(call: Pick<ProtectedCall, 'maxCrashedOwners'>, won: WonClaim): string[] | undefined {
  const crashed = won.takenOver;
  const cap = call.maxCrashedOwners;
  return crashed && cap > 0 && crashed.length >= cap ? [...crashed] : undefined;
}

/**
 * Stores the key as poisoned (FAILED, final, kept `ttlSeconds` like an answer) in place of running the handler, and
 * throws the problem. Counted once here (`idempotency_keys_poisoned_total`); each answer is counted as a request. A
 * refused write means another claim owns the key now: in flight.
 */
export async function poison(
  { repository, telemetry }: { repository: IdempotencyRepository; telemetry: IdempotencyTelemetry },
  call: ProtectedCall,
  claimToken: string,
  owners: string[],
): Promise<never> {
  const { recordKey: key, partition, ttlSeconds } = call;
  const response = poisonedResponse(owners);
  const stored = await retryThroughStoreFaults(() =>
    repository.fail({ key, partition, claimToken, ttlSeconds, response }),
  );
  if (!stored.ok) throw new IdempotencyLeaseLostError(1);
  telemetry.keyPoisoned();
  logger.error({
    msg: `key poisoned: its last ${owners.length} owner(s) crashed running it; the handler is not run again until an operator releases it (keys:release)`,
    key,
    owners,
  });
  throw new IdempotencyKeyPoisonedError(owners);
}

/** The problem a poisoned key's record keeps: what its duplicates are answered. */
function poisonedResponse(owners: string[]): StoredResponse {
  return { statusCode: 500, headers: {}, body: { type: 'key-poisoned', owners } };
}

/** The error a final failure (`isFinalFailure`) answers: a poisoned key, with the owners it names. */
export function finalFailureError(record: IdempotencyRecord): IdempotencyKeyPoisonedError {
  const owners = (record.response?.body as { owners?: unknown } | undefined)?.owners;
  return new IdempotencyKeyPoisonedError(Array.isArray(owners) ? owners.map(String) : []);
}
