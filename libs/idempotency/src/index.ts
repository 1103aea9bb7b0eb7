// The public API of nestjs-dynamodb-idempotency. Everything a user may import is named here.
export { IdempotencyModule } from './idempotency.module';
export { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition';
export { defaultStoreIf } from './options/idempotency.options';
export type {
  IdempotencyMode,
  IdempotencyModuleOptions,
  IdempotentMethodOptions,
  McpKeySource,
  McpToolOptions,
  IdempotentOptions,
  Scope,
  StoreIf,
  UnkeyedCalls,
} from './options/idempotency.options';
export type { EncryptionOptions } from './response/response-sealing';
export { Idempotent } from './decorators/idempotent.decorator';
export { IdempotentOutcome } from './decorators/idempotent-outcome.decorator';
export type { IdempotentOutcomeOptions } from './decorators/idempotent-outcome.decorator';
export { tickKey } from './keys/tick-key';
export { IdempotentRoute } from './decorators/idempotent-route.metadata';
export { IdempotencyService } from './protocol/idempotency.service';
export { IdempotencyContext } from './protocol/idempotency-context';
export { OneTimeTokens } from './protocol/one-time-tokens';
export type { ConsumeOnceOptions } from './protocol/one-time-tokens';
export { MAX_COMMIT_WRITES } from './repository/commit-write';
export type { CommitWrite } from './repository/commit-write';
export type { CallSettings, ExecuteOptions, ProtectedCall, ProtectedWork } from './protocol/idempotency.service';
export type { KeyOutcome, OutcomeTarget } from './protocol/outcome-lookup';
export type { CallPolicy } from './options/route-settings';
export { IdempotencyInterceptor } from './contexts/idempotency.interceptor';
export { IdempotencyExceptionFilter } from './contexts/idempotency-exception.filter';
export { IdempotencyClock, SystemClock } from './idempotency.clock';
export { IdempotencyTelemetry } from './observability/idempotency.telemetry';
export type { StepResult, StoreOperation, SweepFindings } from './observability/idempotency.telemetry';
export { IdempotencyReconciler } from './observability/idempotency.reconciler';
export { pushSweepGauges, reconcileTable } from './observability/reconcile-job';
export { withLambdaContext } from './lambda/lambda-invocation';
export type { LambdaContextLike } from './lambda/lambda-invocation';
export { onLambda } from './lambda/lambda-environment';
export { processBatch } from './lambda/batch-processor';
export type { BatchOptions, BatchResponse } from './lambda/batch-processor';
export type { BatchRecord, DynamoDbStreamRecordLike, KinesisRecordLike, SqsRecordLike } from './lambda/batch-records';
export type { SweepOptions, SweepResult } from './observability/idempotency.reconciler';
export { IdempotencyHealthIndicator } from './observability/idempotency.health';
export type { IdempotencyHealthResult } from './observability/idempotency.health';
export {
  IdempotencyCommitRejectedError,
  IdempotencyError,
  IdempotencyFingerprintFailedError,
  IdempotencyInFlightError,
  IdempotencyLeaseLostError,
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyKeyPoisonedError,
  IdempotencyMismatchError,
  IdempotencyOutcomeNotFoundError,
  IdempotencyRecordUnreadableError,
  IdempotencyRequestInvalidError,
  IdempotencyResultNotStoredError,
  IdempotencyReentrantCallError,
  IdempotencyScopeFailedError,
  IdempotencyStoreMisconfiguredError,
  IdempotencyStoreThrottledError,
  IdempotencyStoreUnavailableError,
} from './errors/idempotency.errors';
export { IdempotencyVersionMismatchError, StepOutcomeUnknownError } from './errors/step-errors';
export { IdempotencyProblemException } from './errors/problem';
export type { ProblemDetails } from './errors/problem';
export { ProblemType } from './errors/outcomes';
export { UnrecordableValueError } from './response/typed-value';
export { UnkeyedCallError } from './unkeyed-calls/unkeyed-call-watch';
export type { UnkeyedCall, UnkeyedCallKind } from './unkeyed-calls/unkeyed-call-watch';
export { watchUnkeyedWrites } from './unkeyed-calls/dynamodb-writes';
export type {
  IdempotencyOutcomeEvent,
  OutcomeEventName,
  ProblemOutcome,
  ProblemTypeUri,
  RequestOutcome,
} from './errors/outcomes';
export { OUTCOME_CHANNEL } from './observability/outcome-events';
export type {
  BinaryBodyType,
  IdempotencyRecord,
  IdempotencyStatus,
  OmittedReason,
  RecordedStep,
  StartedStep,
  StoredResponse,
} from './repository/idempotency.record';
export { IdempotencyRepository } from './repository/idempotency.repository';
export { isFinalFailure } from './repository/idempotency.record';
export type {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  CompleteResult,
  FailInput,
  GetInput,
  InFlightCost,
  InFlightInput,
  PutCompletedInput,
  PutCompletedResult,
  RecordLocation,
  RecordStepInput,
  StartStepInput,
  ReviseStepsInput,
  ReviseStepsResult,
  VersionChange,
  RecordStepResult,
  RenewInput,
  ScanInput,
  TransitionResult,
} from './repository/idempotency.repository';
export { OUTCOME_UNKNOWN } from './protocol/step-runner';
export type { StepBackoff, StepFunction, StepInfo, StepOptions, StepProbe, StepRetry } from './protocol/step-runner';
export { StepTimeoutError } from './protocol/step-attempts';
export type { StepLedger } from './protocol/protected-call';
export { DynamoDbIdempotencyRepository } from './dynamodb/dynamodb-idempotency.repository';
export type { DynamoDbIdempotencyRepositoryOptions } from './dynamodb/dynamodb-idempotency.repository';
export { InMemoryIdempotencyRepository } from './repository/in-memory-idempotency.repository';
export type { InMemoryRepositoryOptions } from './repository/in-memory-idempotency.repository';
export { ensureIdempotencyTable, ensureTable, TTL_ATTRIBUTE } from './dynamodb/idempotency-table';
export { checkIdempotencyTable } from './dynamodb/table-checks';
export type { TableCheck, TableSpec } from './dynamodb/table-checks';
export type { RecordAttribute, TableLayoutOptions } from './dynamodb/table-layout';
export {
  DEFAULT_FAILED_TTL_SECONDS,
  DEFAULT_KEY_HEADER,
  DEFAULT_MAX_CRASHED_OWNERS,
  DEFAULT_MAX_LEASE_SECONDS,
  DEFAULT_PENDING_TTL_SECONDS,
  DEFAULT_REPLAY_HEADERS,
  DEFAULT_RETRY_AFTER_SECONDS,
  DEFAULT_TABLE_NAME,
  DEFAULT_TTL_SECONDS,
  REPLAYED_HEADER,
} from './idempotency.constants';
export { IdempotencyAdmin } from './admin/idempotency-admin';
export type { AdminResult, IdempotencyAdminOptions, KeySelector } from './admin/idempotency-admin';
export type { RecordReport, StepReport } from './admin/record-report';
export type { StepResolution } from './admin/step-surgery';
export type { RemoveInput, RemoveResult } from './repository/idempotency.repository';
export type { PartitionKeyValue } from './options/idempotency.options';
