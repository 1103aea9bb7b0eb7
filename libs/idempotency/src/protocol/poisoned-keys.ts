import { Logger } from '@nestjs/common';
import { IdempotencyKeyPoisonedError, IdempotencyLeaseLostError } from '../errors/idempotency.errors';
import { StepOutcomeUnknownError } from '../errors/step-errors';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRecord, StoredResponse } from '../repository/idempotency.record';
import { IdempotencyRepository } from '../repository/idempotency.repository';
import { retryThroughStoreFaults } from './outcome-recorder';
import { ProtectedCall } from './protected-call';
import { WonClaim } from './single-flight';

/**
 * Final failures: a key stored FAILED with a response, answered to every duplicate until it expires or an operator
 * acts. Poison keys (`maxCrashedOwners`): a request whose handler takes its process down is retried by its client, and each
 * retry after the lease takes the key over on another instance, which dies the same way. The claim that takes a lease
 * over learns, from the record it replaced, the owners that crashed since the record's last clean end (its own
 * conditional write counted them: no extra call); once they reach the cap it does not run the handler, but stores the
 * key as a final failure, answered to every duplicate as 500 `key-poisoned`. And an at-most-once step whose outcome nobody could tell: 500
 * `step-outcome-unknown`.
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

/**
 * Stores the key as a final failure after an at-most-once step's outcome was found unknown (`StepOutcomeUnknownError`):
 * every duplicate gets it until an operator settles the step (`keys:resolve-step`) or it expires. The owner ended
 * cleanly (it did not crash). A refused write means another claim owns the key now: in flight.
 */
export async function storeUnknownOutcome(
  { repository }: { repository: IdempotencyRepository },
  call: ProtectedCall,
  claimToken: string,
  error: StepOutcomeUnknownError,
): Promise<never> {
  const { recordKey: key, partition, ttlSeconds } = call;
  const { step, attempt } = error;
  const response = { statusCode: 500, headers: {}, body: { type: 'step-outcome-unknown', step, attempt } };
  const stored = await retryThroughStoreFaults(() =>
    repository.fail({ key, partition, claimToken, ttlSeconds, response, endedCleanly: true }),
  );
  if (!stored.ok) throw new IdempotencyLeaseLostError(1);
  logger.error({
    msg: 'step outcome unknown: an at-most-once step was interrupted and nothing could tell whether it had its effect; the key answers step-outcome-unknown until an operator settles the step (keys:resolve-step)',
    key,
    step,
    attempt,
  });
  throw error;
}

/** The problem a poisoned key's record keeps: what its duplicates are answered. */
function poisonedResponse(owners: string[]): StoredResponse {
  return { statusCode: 500, headers: {}, body: { type: 'key-poisoned', owners } };
}

/**
 * The error a final failure (`isFinalFailure`) answers: an at-most-once step's unknown outcome (the step and attempt it
 * names), or a poisoned key (the owners it names).
 */
export function finalFailureError(record: IdempotencyRecord): IdempotencyKeyPoisonedError | StepOutcomeUnknownError {
  const body = (record.response?.body ?? {}) as { type?: unknown; owners?: unknown; step?: unknown; attempt?: unknown };
  if (body.type === 'step-outcome-unknown') return new StepOutcomeUnknownError(String(body.step), Number(body.attempt));
  return new IdempotencyKeyPoisonedError(Array.isArray(body.owners) ? body.owners.map(String) : []);
}
