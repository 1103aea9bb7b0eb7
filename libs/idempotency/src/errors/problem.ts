import { HttpException } from '@nestjs/common';
import { IdempotencyError } from './idempotency.errors';
import { PROBLEMS, problemTypeUri, ProblemTypeUri } from './outcomes';

/** The detail of a problem that came once the call's work had started (a step had run): nothing says it did not. */
const PARTLY_PROCESSED =
  'The request may have been partly processed: the idempotency store failed while it ran. Retry with the same key: ' +
  'what it recorded is not done again.';

/** An RFC 9457 problem details body. */
export interface ProblemDetails {
  type: ProblemTypeUri;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

/**
 * An `IdempotencyError` as HTTP: `IdempotencyExceptionFilter` sends it as `application/problem+json` with its
 * headers (`Retry-After`); `getResponse()` is the problem body and the typed error is the `cause`.
 */
export class IdempotencyProblemException extends HttpException {
  constructor(
    readonly problem: ProblemDetails,
    readonly headers: Record<string, string> = {},
    options?: { cause?: unknown },
  ) {
    super(problem, problem.status, options);
  }

  /** The error's outcome, answered as its row of `PROBLEMS` says. */
  static from(error: IdempotencyError): IdempotencyProblemException {
    const row: (typeof PROBLEMS)[keyof typeof PROBLEMS] & { detail?: string; retryAfter?: number | 'lease' } =
      PROBLEMS[error.outcome];
    const problem: ProblemDetails = {
      type: problemTypeUri(row.slug),
      title: row.title,
      status: row.status,
      detail: error.workStarted ? PARTLY_PROCESSED : (row.detail ?? error.message),
      ...error.problemExtensions(),
    };
    const retryAfter =
      row.retryAfter === 'lease' ? (error as { retryAfterSeconds?: number }).retryAfterSeconds : row.retryAfter;
    return new IdempotencyProblemException(
      problem,
      retryAfter === undefined ? {} : { 'Retry-After': String(retryAfter) },
      { cause: error },
    );
  }
}
