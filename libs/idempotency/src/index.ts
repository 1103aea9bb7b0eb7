// The public API of nestjs-dynamodb-idempotency. Everything a user may import is named here.
export { IdempotencyModule } from './idempotency.module';
export { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition';
export { defaultStoreIf } from './idempotency.options';
export type { IdempotencyModuleOptions, IdempotentOptions, Scope, StoreIf } from './idempotency.options';
export type { EncryptionOptions } from './response-sealing';
export { Idempotent } from './idempotent.decorator';
export { IdempotentRoute } from './idempotent-route.metadata';
export { IdempotencyService } from './idempotency.service';
export { IdempotencyContext, MAX_COMMIT_WRITES } from './idempotency-context';
export type { CommitWrite } from './idempotency-context';
export type { CallSettings, ExecuteOptions, ProtectedCall, ProtectedWork } from './idempotency.service';
export { IdempotencyInterceptor } from './idempotency.interceptor';
export { IdempotencyExceptionFilter } from './idempotency-exception.filter';
export { IdempotencyClock, SystemClock } from './idempotency.clock';
export { IdempotencyTelemetry } from './idempotency.telemetry';
export type { RequestOutcome, StoreOperation, SweepFindings } from './idempotency.telemetry';
export { IdempotencyReconciler } from './idempotency.reconciler';
export type { SweepOptions, SweepResult } from './idempotency.reconciler';
export { IdempotencyHealthIndicator } from './idempotency.health';
export type { IdempotencyHealthResult } from './idempotency.health';
export {
  IdempotencyCommitRejectedError,
  IdempotencyError,
  IdempotencyInFlightError,
  IdempotencyLeaseLostError,
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyMismatchError,
  IdempotencyProblemException,
  IdempotencyRecordUnreadableError,
  IdempotencyRequestInvalidError,
  IdempotencyResultNotStoredError,
  IdempotencyStoreThrottledError,
  IdempotencyStoreUnavailableError,
  ProblemType,
} from './idempotency.errors';
export type { ProblemDetails, ProblemTypeUri } from './idempotency.errors';
export type { BinaryBodyType, IdempotencyRecord, IdempotencyStatus, StoredResponse } from './idempotency.record';
export { IdempotencyRepository } from './repository/idempotency.repository';
export type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  CompleteResult,
  FailInput,
  GetInput,
  RenewInput,
  ScanInput,
  TransitionResult,
} from './repository/idempotency.repository';
export { DynamoDbIdempotencyRepository } from './repository/dynamodb-idempotency.repository';
export type { DynamoDbIdempotencyRepositoryOptions } from './repository/dynamodb-idempotency.repository';
export { InMemoryIdempotencyRepository } from './repository/in-memory-idempotency.repository';
export { checkIdempotencyTable, ensureIdempotencyTable, ensureTable, TTL_ATTRIBUTE } from './idempotency-table';
export type { TableCheck } from './idempotency-table';
export {
  DEFAULT_FAILED_TTL_SECONDS,
  DEFAULT_KEY_HEADER,
  DEFAULT_MAX_LEASE_SECONDS,
  DEFAULT_PENDING_TTL_SECONDS,
  DEFAULT_REPLAY_HEADERS,
  DEFAULT_RETRY_AFTER_SECONDS,
  DEFAULT_TABLE_NAME,
  DEFAULT_TTL_SECONDS,
  REPLAYED_HEADER,
} from './idempotency.constants';
