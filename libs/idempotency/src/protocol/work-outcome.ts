import { Logger } from '@nestjs/common';
import { StoredResponse } from '../repository/idempotency.record';
import { ProtectedCall, ProtectedWork } from './protected-call';

/** A run's outcome as the store keeps it, in either mode: what to store for a result or an error, and whether it is final. */

/** What to store for a result; a result that cannot be stored (or whose capture throws) is recorded without a body. */
export function captured<T>(logger: Logger, call: ProtectedCall, work: ProtectedWork<T>, result: T): StoredResponse {
  let stored: StoredResponse;
  try {
    stored = work.capture(result);
  } catch (error) {
    stored = { statusCode: 200, headers: {}, bodyOmitted: true };
    logger.error({ msg: 'capturing the result failed', key: call.recordKey, error: String(error) });
  }
  if (stored.bodyOmitted) {
    logger.warn({
      msg: 'result cannot be stored for replay (a raw stream, or not JSON): recorded as done without a body; duplicates get 409 response-not-stored',
      key: call.recordKey,
    });
  }
  return stored;
}

/**
 * `storeIf`'s verdict. Without one, results are final and errors are not; a `storeIf` that throws is logged and
 * read the same way (a result's work is done; an error's may be retried).
 */
export function isFinal<T>(
  logger: Logger,
  call: ProtectedCall,
  work: ProtectedWork<T>,
  stored: StoredResponse,
  error?: unknown,
): boolean {
  const fallback = error === undefined;
  try {
    return work.isFinal?.(stored, error) ?? fallback;
  } catch (storeIfError) {
    logger.error({
      msg: `storeIf threw; the outcome is ${fallback ? 'stored' : 'not stored'}`,
      key: call.recordKey,
      error: String(storeIfError),
    });
    return fallback;
  }
}

/** What to store for a thrown error when it is final; undefined releases the key (also when capturing throws). */
export function capturedError<T>(
  logger: Logger,
  call: ProtectedCall,
  work: ProtectedWork<T>,
  error: unknown,
): StoredResponse | undefined {
  try {
    return work.captureError?.(error);
  } catch (captureError) {
    logger.error({
      msg: 'capturing the error failed; the key is released',
      key: call.recordKey,
      error: String(captureError),
    });
    return undefined;
  }
}
