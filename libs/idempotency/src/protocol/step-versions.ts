import { Logger } from '@nestjs/common';
import { IdempotencyVersionMismatchError } from '../errors/step-errors';
import { claimableBy, IdempotencyRecord, versionChange } from '../repository/idempotency.record';
import { ProtectedCall } from './protected-call';

/**
 * Versions of a handler's steps (`@Idempotent({ version, onVersionChange })`). The claim writes the call's version on
 * the record; a claim that would resume steps another version recorded or started loses (`'refuse'`), takes the record
 * over without them (`'restart'`), or resumes them (`'resume'`): the store decides, in the claim's own condition. This
 * answers the refusal.
 */

const logger = new Logger('Idempotency');

/** How soon a refused call is worth sending again: long enough to land on another instance during a rolling deploy. */
const VERSION_RETRY_AFTER_SECONDS = 1;

/**
 * Throws `IdempotencyVersionMismatchError` (503 version-mismatch) when `record` is one the call's claim would resume but
 * refused: its request, unfinished, claimable now, holding steps of another version. Anything else is left to the
 * caller (a completed record replays whatever its version).
 */
export function refuseOtherVersion(call: ProtectedCall, record: IdempotencyRecord, nowSeconds: number): void {
  if (record.status === 'COMPLETED' || record.fingerprint !== call.fingerprint) return;
  if (versionChange(call, record) !== 'refuse') return;
  if (!claimableBy(record, call.fingerprint, nowSeconds, call.clockSkewSeconds)) return;
  logger.warn({
    msg: "version mismatch: the request's steps were recorded by another version of the handler; it is left to an instance of that version (onVersionChange 'refuse')",
    key: call.recordKey,
    recordVersion: record.version ?? null,
    version: call.version,
  });
  throw new IdempotencyVersionMismatchError(record.version, call.version!, VERSION_RETRY_AFTER_SECONDS);
}
