// nestjs-dynamodb-idempotency/client: a retrying HTTP client that carries one key per logical call. It imports nothing
// from Nest or the AWS SDK (Node.js 20+ with the global fetch, or a browser bundle).
export { createIdempotentClient, IdempotentRequestError } from './idempotent-client';
export type {
  IdempotentClient,
  IdempotentClientOptions,
  IdempotentRequestOptions,
  IdempotentResponse,
} from './idempotent-client';
export { backoffMs, retryAfterMs } from './retry-delay';
export { IdempotentNotProcessedError } from './outcome-door';
