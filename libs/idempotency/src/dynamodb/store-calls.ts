import {
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { Logger } from '@nestjs/common';
import { IdempotencyTelemetry, StoreOperation } from '../observability/idempotency.telemetry';
import {
  dynamoErrorCode,
  isConditionalCheckFailed,
  isReplicatedWriteConflict,
  isTransactionCanceled,
  misconfigurationFix,
  throttlingReasons,
  toStoreError,
} from './dynamodb-errors';

/** The output fields the repository reads, whatever the command. */
export interface CallOutput {
  Item?: Record<string, unknown>;
  /** The old item, from an `UpdateItem` that asked for it (the claim). */
  Attributes?: Record<string, unknown>;
  Items?: Record<string, unknown>[];
  LastEvaluatedKey?: Record<string, unknown>;
}

/**
 * Every DynamoDB request of the repository goes through `send`: timed and counted (`idempotency_store_call_duration_seconds`),
 * store faults logged and thrown as typed errors (throttled, misconfigured with its fix, unavailable), answers the
 * caller reads (a failed condition, a cancelled transaction, a claim contended across Regions) passed through.
 */
export class StoreCalls {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly documents: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly telemetry: IdempotencyTelemetry,
  ) {}

  async send(
    operation: StoreOperation,
    command:
      | PutItemCommand
      | UpdateItemCommand
      | GetItemCommand
      | ScanCommand
      | QueryCommand
      | DeleteItemCommand
      | TransactWriteCommand,
  ): Promise<CallOutput> {
    const started = performance.now();
    let result = 'ok';
    try {
      // One call site for every command type, low-level or DocumentClient: one client, one middleware stack.
      return (await this.documents.send(command as TransactWriteCommand)) as CallOutput;
    } catch (error) {
      result = dynamoErrorCode(error);
      const fields = { operation, table: this.tableName, dynamo_error_code: result };
      // Contention on a completion or release is a fault like throttling: retried by the service.
      if (
        isConditionalCheckFailed(error) ||
        isTransactionCanceled(error) ||
        (operation === 'claim' && isReplicatedWriteConflict(error))
      ) {
        // A lost claim is a duplicate, not a fault: one line at debug (a fresh Nest app prints debug), counted in metrics.
        this.logger.debug(`conditional write rejected: ${operation} on ${this.tableName} (${result})`);
        throw error;
      }
      const fix = misconfigurationFix(error);
      const msg = fix ? 'idempotency store refused the call; retrying will not help' : 'idempotency store call failed';
      const reasons = throttlingReasons(error); // which table or index was short of capacity
      this.logger.error({
        msg,
        ...fields,
        ...(fix ? { fix } : {}),
        ...(reasons.length ? { throttling_reasons: reasons } : {}),
      });
      throw toStoreError(operation, error);
    } finally {
      this.telemetry.storeCall(this.tableName, operation, (performance.now() - started) / 1000, result);
    }
  }
}
