import { Logger } from '@nestjs/common';
import { IdempotencyRecordUnreadableError, IdempotencyResultNotStoredError } from '../errors/idempotency.errors';
import { IdempotencyRecord, StoredResponse } from '../repository/idempotency.record';
import { ResponseSealer, UnreadableRecordError } from '../response/response-sealing';
import { ReplayCache } from './replay-cache';

/** A COMPLETED record's response, opened when sealed. One that cannot be replayed fails closed: it never runs again. */
export function completedResponse(
  record: IdempotencyRecord,
  sealer: ResponseSealer | undefined,
  logger: Logger,
): StoredResponse {
  const response = record.response;
  if (!response || response.bodyOmitted) {
    throw new IdempotencyResultNotStoredError(response?.statusCode ?? 0, response?.omittedBecause);
  }
  if (!sealer) return response;
  try {
    return sealer.open(record.key, response);
  } catch (error) {
    const reason = error instanceof UnreadableRecordError ? error.message : `it cannot be decoded (${String(error)})`;
    logger.error({
      msg: 'stored response unreadable; answering 500 record-unreadable, never re-running',
      key: record.key,
      reason,
    });
    throw new IdempotencyRecordUnreadableError(reason);
  }
}

/** A COMPLETED record's response to replay to a duplicate (`completedResponse`), kept in the replay cache for the next. */
export function replayOf(
  recordKey: string,
  record: IdempotencyRecord,
  { sealer, logger, cache }: { sealer?: ResponseSealer; logger: Logger; cache: ReplayCache },
): StoredResponse {
  const response = completedResponse(record, sealer, logger);
  cache.set(recordKey, { fingerprint: record.fingerprint, expiresAt: record.expiresAt, response });
  return response;
}
