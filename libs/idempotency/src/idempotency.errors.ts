import { HttpException, HttpStatus } from '@nestjs/common';

/** DynamoDB answered with throttling even after the SDK's own retries. Never a duplicate. */
export class IdempotencyStoreThrottledError extends Error {
  override readonly name = 'IdempotencyStoreThrottledError';
  constructor(
    readonly operation: string,
    /** The DynamoDB error name, e.g. `ProvisionedThroughputExceededException`. */
    readonly dynamoErrorCode: string,
    options?: ErrorOptions,
  ) {
    super(`Idempotency store throttled the ${operation} (${dynamoErrorCode})`, options);
  }
}

/** The store could not answer: timeout, socket error, 5xx, missing table, denied access. Fail closed. */
export class IdempotencyStoreUnavailableError extends Error {
  override readonly name = 'IdempotencyStoreUnavailableError';
  constructor(
    readonly operation: string,
    readonly dynamoErrorCode: string,
    options?: ErrorOptions,
  ) {
    super(`Idempotency store unavailable for the ${operation} (${dynamoErrorCode})`, options);
  }
}

/** The stable problem types (RFC 9457 `type`), one per outcome. */
export const ProblemType = {
  keyMissing: 'urn:nestjs-dynamodb-idempotency:key-missing',
  keyInvalid: 'urn:nestjs-dynamodb-idempotency:key-invalid',
  requestInvalid: 'urn:nestjs-dynamodb-idempotency:request-invalid',
  fingerprintMismatch: 'urn:nestjs-dynamodb-idempotency:fingerprint-mismatch',
  inFlight: 'urn:nestjs-dynamodb-idempotency:in-flight',
  responseNotStored: 'urn:nestjs-dynamodb-idempotency:response-not-stored',
  storeThrottled: 'urn:nestjs-dynamodb-idempotency:store-throttled',
  storeUnavailable: 'urn:nestjs-dynamodb-idempotency:store-unavailable',
} as const;

export type ProblemTypeUri = (typeof ProblemType)[keyof typeof ProblemType];

/** An RFC 9457 problem details body. */
export interface ProblemDetails {
  type: ProblemTypeUri;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

/**
 * Every outcome the module answers itself (400, 409, 422, 503). `IdempotencyExceptionFilter` sends it as
 * `application/problem+json` with its headers (`Retry-After`); `getResponse()` is the problem body.
 */
export class IdempotencyProblemException extends HttpException {
  constructor(
    readonly problem: ProblemDetails,
    readonly headers: Record<string, string> = {},
    options?: { cause?: unknown },
  ) {
    super(problem, problem.status, options);
  }

  static keyMissing(header: string): IdempotencyProblemException {
    return new IdempotencyProblemException({
      type: ProblemType.keyMissing,
      title: 'Idempotency key missing',
      status: HttpStatus.BAD_REQUEST,
      detail: `This operation is idempotent and requires an ${header} header.`,
    });
  }

  static keyInvalid(detail: string): IdempotencyProblemException {
    return new IdempotencyProblemException({
      type: ProblemType.keyInvalid,
      title: 'Idempotency key invalid',
      status: HttpStatus.BAD_REQUEST,
      detail,
    });
  }

  static requestInvalid(detail: string): IdempotencyProblemException {
    return new IdempotencyProblemException({
      type: ProblemType.requestInvalid,
      title: 'Request cannot be fingerprinted',
      status: HttpStatus.BAD_REQUEST,
      detail,
    });
  }

  static fingerprintMismatch(): IdempotencyProblemException {
    return new IdempotencyProblemException({
      type: ProblemType.fingerprintMismatch,
      title: 'Idempotency key reused with a different request',
      status: HttpStatus.UNPROCESSABLE_ENTITY,
      detail: 'This idempotency key was already used with a different request. Use a new key for a new request.',
    });
  }

  static inFlight(retryAfterSeconds: number): IdempotencyProblemException {
    return new IdempotencyProblemException(
      {
        type: ProblemType.inFlight,
        title: 'Request in progress',
        status: HttpStatus.CONFLICT,
        detail: 'A request with this idempotency key is still being processed. Retry after the indicated delay.',
      },
      { 'Retry-After': String(retryAfterSeconds) },
    );
  }

  static responseNotStored(statusCode: number): IdempotencyProblemException {
    return new IdempotencyProblemException({
      type: ProblemType.responseNotStored,
      title: 'Request already processed',
      status: HttpStatus.CONFLICT,
      detail:
        'A request with this idempotency key was processed, but its response was too large to store for replay. ' +
        'It will not be processed again.',
      originalStatus: statusCode,
    });
  }

  static storeThrottled(retryAfterSeconds: number, cause: unknown): IdempotencyProblemException {
    return new IdempotencyProblemException(
      {
        type: ProblemType.storeThrottled,
        title: 'Idempotency store throttled',
        status: HttpStatus.SERVICE_UNAVAILABLE,
        detail: 'The request was not processed because the idempotency store is throttling. Retry with the same key.',
      },
      { 'Retry-After': String(retryAfterSeconds) },
      { cause },
    );
  }

  static storeUnavailable(retryAfterSeconds: number, cause: unknown): IdempotencyProblemException {
    return new IdempotencyProblemException(
      {
        type: ProblemType.storeUnavailable,
        title: 'Idempotency store unavailable',
        status: HttpStatus.SERVICE_UNAVAILABLE,
        detail: 'The request was not processed because the idempotency store is unavailable. Retry with the same key.',
      },
      { 'Retry-After': String(retryAfterSeconds) },
      { cause },
    );
  }
}
