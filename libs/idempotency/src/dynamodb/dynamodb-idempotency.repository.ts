import {
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
  UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { IdempotencyClock, SystemClock } from '../idempotency.clock';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { IdempotencyRecord } from '../repository/idempotency.record';
import {
  ClaimInput,
  ClaimResult,
  CompleteInput,
  CompleteResult,
  FailInput,
  GetInput,
  IdempotencyRepository,
  InFlightCost,
  InFlightInput,
  PutCompletedInput,
  PutCompletedResult,
  RecordLocation,
  RecordStepInput,
  RecordStepResult,
  refusal,
  RemoveInput,
  RemoveResult,
  RenewInput,
  ReviseStepsInput,
  ReviseStepsResult,
  ScanInput,
  StartStepInput,
  TransitionResult,
} from '../repository/idempotency.repository';
import { recordStepRequest, startStepRequest } from './claim-requests';
import { claimRecord } from './record-claim';
import { CompletionCommits, supportsTransactions } from './commit-transaction';
import { CompletedPutStore, putCompletedRecord } from './completed-put';
import { isConditionalCheckFailed } from './dynamodb-errors';
import { recordFromItem, responseAttribute, writeCompletion } from './item-mapping';
import {
  cleanly,
  completion,
  FAILURE,
  FAILURE_FORGETTING_RUN,
  finalFailure,
  getRequest,
  guarded,
  renewal,
  Transition,
  updateRequest,
} from './record-requests';
import { inFlightCostOf } from './in-flight-index';
import { removeRequest, reopenRequest, reviseStepsRequest } from './operator-requests';
import { inFlightRecords, scanRecords } from './record-scan';
import { StoreCalls } from './store-calls';
import { tableReadiness } from './table-checks';
import { TableModeProbe } from './global-tables';
import { TableLayout, TableLayoutOptions } from './table-layout';

/** The owner's release and a sweep's or an operator's, each with the run kept and forgotten (`FailInput`). */
const KEPT = [FAILURE, FAILURE_FORGETTING_RUN];
const CLEAN = KEPT.map(cleanly);

export interface DynamoDbIdempotencyRepositoryOptions extends TableLayoutOptions {
  client: DynamoDBClient | DynamoDBDocumentClient;
  tableName: string;
  clock?: IdempotencyClock;
  telemetry?: IdempotencyTelemetry;
}

/**
 * The DynamoDB repository: one conditional write per state transition, first writer wins, in the order of the state
 * machine. The record's own reads and writes are low-level commands with their attribute values written out, which
 * skips the DocumentClient's marshalling; `commitWith` (whose writes are the application's) uses the DocumentClient.
 * Item mapping, the commit transaction and the table checks are in their own files beside this one.
 */
export class DynamoDbIdempotencyRepository extends IdempotencyRepository {
  private readonly documents: DynamoDBDocumentClient;
  private readonly calls: StoreCalls;
  private readonly tableName: string;
  private readonly layout: TableLayout;
  private readonly clock: IdempotencyClock;
  private readonly telemetry: IdempotencyTelemetry;
  private readonly commits: CompletionCommits;
  private transactionSupport?: Promise<boolean>;
  /** Whether the table's index of keys in flight was ACTIVE when last described (`inFlightCost`). */
  private inFlightIndexed?: boolean;
  private readonly table: TableModeProbe;
  private readonly completedPuts: CompletedPutStore;

  constructor({
    client,
    tableName,
    clock = new SystemClock(),
    telemetry = new IdempotencyTelemetry(),
    ...layout
  }: DynamoDbIdempotencyRepositoryOptions) {
    super();
    this.documents = client instanceof DynamoDBDocumentClient ? client : DynamoDBDocumentClient.from(client);
    this.tableName = tableName;
    this.layout = TableLayout.from(layout, 'DynamoDbIdempotencyRepository');
    this.clock = clock;
    this.telemetry = telemetry;
    this.calls = new StoreCalls(this.documents, tableName, telemetry);
    this.table = new TableModeProbe(tableName, () => tableReadiness(this.documents, tableName, this.layout));
    this.commits = new CompletionCommits({
      calls: this.calls,
      tableName,
      layout: this.layout,
      refused: () => telemetry.conditionRejected(tableName, 'complete'),
      existing: (location, failed) => this.existingAfterFailedCondition(location, failed),
    });
    this.completedPuts = {
      calls: this.calls,
      tableName,
      layout: this.layout,
      nowSeconds: () => this.clock.nowSeconds(),
      refused: () => telemetry.conditionRejected(tableName, 'claim'),
      existing: (location, failed) => this.existingAfterFailedCondition(location, failed),
    };
  }

  /** The resume form first (its steps come back); the restart form only after that lost (`claim-requests.ts`). */
  claim(claim: ClaimInput): Promise<ClaimResult> {
    return claimRecord(this.completedPuts, claim);
  }

  /** A step's result on the record, only while `claimToken` owns it (`claim-requests.ts`). */
  override recordStep(input: RecordStepInput): Promise<RecordStepResult> {
    return this.stepWrite(input, recordStepRequest(this.tableName, this.layout, input, this.clock.nowSeconds()));
  }

  /** An at-most-once step's start on the record, only while `claimToken` owns it (`claim-requests.ts`). */
  override startStep(input: StartStepInput): Promise<RecordStepResult> {
    return this.stepWrite(input, startStepRequest(this.tableName, this.layout, input, this.clock.nowSeconds()));
  }

  /** A step's write (counted as `step`, a start or a result), or why it was refused. */
  private async stepWrite(input: StartStepInput, request: UpdateItemCommandInput): Promise<RecordStepResult> {
    try {
      await this.calls.send('step', new UpdateItemCommand(request));
      return { ok: true };
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
      this.telemetry.conditionRejected(this.tableName, 'step');
      return refusal(input.claimToken, await this.existingAfterFailedCondition(input, error));
    }
  }

  async complete(input: CompleteInput): Promise<CompleteResult> {
    const { key, partition, claimToken, response, ttlSeconds, writes, stepBytes = 0 } = input;
    const now = this.clock.nowSeconds();
    return writeCompletion(response, stepBytes, (attribute) => {
      const update = completion(attribute, now);
      if (writes?.length) return this.commits.commit({ key, partition }, claimToken, now + ttlSeconds, update, writes);
      return this.transition('complete', { key, partition }, claimToken, now + ttlSeconds, update);
    });
  }

  /** Optimistic mode: one conditional `PutItem` (with writes, one `TransactWriteItems`); see `putCompletedRecord`. */
  override putCompleted(input: PutCompletedInput): Promise<PutCompletedResult> {
    return putCompletedRecord(this.completedPuts, input);
  }

  async fail(input: FailInput): Promise<TransitionResult> {
    const { key, partition, claimToken, ttlSeconds, forgetRun, leaseEndedBefore, endedCleanly, response } = input;
    const expiresAt = this.clock.nowSeconds() + ttlSeconds;
    const failure = response
      ? finalFailure(responseAttribute(response))
      : (endedCleanly ? CLEAN : KEPT)[forgetRun ? 1 : 0];
    return this.transition('fail', { key, partition }, claimToken, expiresAt, failure, leaseEndedBefore);
  }

  async renew({ key, partition, claimToken, leaseSeconds }: RenewInput): Promise<TransitionResult> {
    const now = this.clock.nowSeconds();
    return this.transition('renew', { key, partition }, claimToken, now + leaseSeconds, renewal(now));
  }

  async get(location: GetInput): Promise<IdempotencyRecord | undefined> {
    const { Item } = await this.calls.send(
      'get',
      new GetItemCommand(getRequest(this.tableName, this.layout, location)),
    );
    return Item && recordFromItem(this.layout, Item);
  }

  /** The module's records a page at a time (in a shared table, only its own); one partition's by a Query. */
  scan(input: ScanInput): AsyncIterable<IdempotencyRecord[]> {
    return scanRecords(this.calls, this.tableName, this.layout, input);
  }

  /**
   * The keys in flight: from the table's index of them when it has one (a Query of each shard: what is read grows with
   * the keys in flight, not the table), else from a scan of the table, filtered.
   */
  override async *inFlight(input: InFlightInput): AsyncIterable<IdempotencyRecord[]> {
    const indexed = this.inFlightIndexed ?? (await this.inFlightCost()).indexed;
    if (indexed) yield* inFlightRecords(this.calls, this.tableName, this.layout, input);
    else yield* super.inFlight(input);
  }

  /** What reading the keys in flight reads: `DescribeTable` says whether the index is there, and the table's size. */
  override async inFlightCost(): Promise<InFlightCost> {
    const cost = await inFlightCostOf(this.documents as unknown as DynamoDBClient, this.tableName, this.layout);
    this.inFlightIndexed = cost.indexed;
    return cost;
  }

  override remove(input: RemoveInput): Promise<RemoveResult> {
    return this.operatorWrite(input, new DeleteItemCommand(removeRequest(this.tableName, this.layout, input, input)));
  }

  override reopen(input: Omit<RemoveInput, 'status'>): Promise<RemoveResult> {
    const request = reopenRequest(this.tableName, this.layout, input, input.claimToken);
    return this.operatorWrite(input, new UpdateItemCommand(request));
  }

  /** An operator's revision of a request's steps, conditioned on the record as read (`operator-requests.ts`). */
  override async reviseSteps(input: ReviseStepsInput): Promise<ReviseStepsResult> {
    const request = reviseStepsRequest(this.tableName, this.layout, input, this.clock.nowSeconds());
    const written = await this.operatorWrite(input, new UpdateItemCommand(request));
    return written.removed ? { revised: true } : { revised: false, current: written.current };
  }

  /** An operator's write (a removal, a reopening, a revision), conditioned on the record as read. */
  private async operatorWrite(
    location: RecordLocation,
    command: DeleteItemCommand | UpdateItemCommand,
  ): Promise<RemoveResult> {
    try {
      await this.calls.send('remove', command);
      return { removed: true };
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
      return { removed: false, current: await this.existingAfterFailedCondition(location, error) };
    }
  }

  /**
   * Transactions, unless the table is an MRSC global table (which has none). The table's mode is the startup check's;
   * without the startup check (a Lambda cold start saving its round trip) the first call that asks describes the table
   * beside the transactions' probe, in parallel: that call waits for one round trip either way.
   */
  override supportsCommitWith(): Promise<boolean> {
    this.transactionSupport ??= this.table
      .hasTransactions(() => supportsTransactions(this.documents))
      .catch((error) => {
        this.transactionSupport = undefined; // a fault is not an answer: the next call asks again
        throw error;
      });
    return this.transactionSupport;
  }

  /** The table's TTL deletes expired records, except on an MRSC global table (no TTL there: the reconciler does). */
  override async expiresRecordsItself(): Promise<boolean> {
    return (await this.table.mode()) !== 'STRONG';
  }

  /** `DescribeTable`: the table exists, these credentials may use it, its key is the layout's; a global table is said. */
  override checkReady(): Promise<void> {
    return this.table.checkReady();
  }

  /** Complete, fail and renew: an UpdateItem guarded by ownership; a failed guard is re-read and explained. */
  private async transition(
    operation: 'complete' | 'fail' | 'renew',
    location: RecordLocation,
    claimToken: string,
    expiresAt: number,
    transition: Transition,
    leaseEndedBefore?: number,
  ): Promise<TransitionResult> {
    const update = guarded(this.layout, claimToken, expiresAt, transition, leaseEndedBefore);
    try {
      await this.calls.send(
        operation,
        new UpdateItemCommand(updateRequest(this.tableName, this.layout, location, update)),
      );
      return { ok: true, expiresAt };
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
      this.telemetry.conditionRejected(this.tableName, operation);
      return refusal(claimToken, await this.existingAfterFailedCondition(location, error));
    }
  }

  /** Real DynamoDB returns the item on the exception (marshalled even through the DocumentClient); dynalite does not. */
  private async existingAfterFailedCondition(
    location: RecordLocation,
    error: { Item?: Record<string, unknown> },
  ): Promise<IdempotencyRecord | undefined> {
    if (error.Item) return recordFromItem(this.layout, error.Item);
    return this.get(location);
  }
}
