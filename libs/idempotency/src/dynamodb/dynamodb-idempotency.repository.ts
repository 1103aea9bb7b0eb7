import { randomUUID } from 'node:crypto';
import { DeleteItemCommand, DynamoDBClient, GetItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { IdempotencyInFlightError, IdempotencyStoreUnavailableError } from '../errors/idempotency.errors';
import { IdempotencyClock, SystemClock } from '../idempotency.clock';
import { MAX_CLAIM_ATTEMPTS } from '../idempotency.constants';
import { IdempotencyTelemetry } from '../observability/idempotency.telemetry';
import { claimableBy, IdempotencyRecord } from '../repository/idempotency.record';
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
  ScanInput,
  TransitionResult,
} from '../repository/idempotency.repository';
import { RecordRead, recordStepRequest, restartClaimRequest, resumeClaimRequest } from './claim-requests';
import { CompletionCommits, supportsTransactions } from './commit-transaction';
import { CompletedPutStore, putCompletedRecord } from './completed-put';
import { isConditionalCheckFailed, isReplicatedWriteConflict } from './dynamodb-errors';
import { recordFromItem, writeCompletion } from './item-mapping';
import {
  completion,
  FAILURE,
  FAILURE_FORGETTING_RUN,
  getRequest,
  guarded,
  removeRequest,
  renewal,
  Transition,
  updateRequest,
} from './record-requests';
import { inFlightCostOf } from './in-flight-index';
import { inFlightRecords, scanRecords } from './record-scan';
import { StoreCalls } from './store-calls';
import { tableReadiness } from './table-checks';
import { TableModeProbe } from './global-tables';
import { TableLayout, TableLayoutOptions } from './table-layout';

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
  async claim(claim: ClaimInput): Promise<ClaimResult> {
    const { key, partition, fingerprint, clockSkewSeconds = 0 } = claim;
    let restarting: RecordRead | undefined;
    for (let attempt = 1; ; attempt++) {
      const claimToken = randomUUID();
      const now = this.clock.nowSeconds();
      try {
        const request = { claim, claimToken, nowSeconds: now };
        const command =
          restarting === undefined
            ? resumeClaimRequest(this.tableName, this.layout, request)
            : restartClaimRequest(this.tableName, this.layout, request, restarting);
        const { Attributes } = await this.calls.send('claim', new UpdateItemCommand(command));
        const resumed = Attributes && recordFromItem(this.layout, Attributes);
        if (!resumed) return { claimed: true, claimToken, run: 1, steps: [] };
        return { claimed: true, claimToken, run: Math.max(1, (resumed.runs ?? 0) + 1), steps: resumed.steps ?? [] };
      } catch (error) {
        // Another Region wrote the item at the same moment (multi-Region strong consistency): contention, like a
        // lost race whose winner is not known yet. Claimed again, then reported in flight, never a duplicate.
        if (isReplicatedWriteConflict(error)) {
          if (attempt >= MAX_CLAIM_ATTEMPTS) throw new IdempotencyInFlightError(1);
          continue;
        }
        if (!isConditionalCheckFailed(error)) throw error;
        this.telemetry.conditionRejected(this.tableName, 'claim');
        const existing = await this.existingAfterFailedCondition({ key, partition }, error);
        // The SDK retried a claim whose first attempt timed out but landed: that attempt was ours.
        if (existing?.claimToken === claimToken) {
          return { claimed: true, claimToken, run: existing.runs ?? 1, steps: existing.steps ?? [] };
        }
        const blocking = existing && !claimableBy(existing, fingerprint, this.clock.nowSeconds(), clockSkewSeconds);
        // Gone (TTL deleted it), expired or failed since the condition was checked: claim again, a few times.
        if (existing && (blocking || attempt >= MAX_CLAIM_ATTEMPTS)) return { claimed: false, existing };
        if (attempt >= MAX_CLAIM_ATTEMPTS) throw new IdempotencyStoreUnavailableError('claim', 'ClaimContention');
        // Claimable: the same request unfinished is resumed; another request's record, or a finished one, restarted.
        const resumable = existing?.status !== 'COMPLETED' && existing?.fingerprint === fingerprint;
        restarting = existing && !resumable ? existing : undefined;
      }
    }
  }

  /** A step's result on the record, only while `claimToken` owns it (`claim-requests.ts`). */
  override async recordStep(input: RecordStepInput): Promise<RecordStepResult> {
    const request = recordStepRequest(this.tableName, this.layout, input, this.clock.nowSeconds());
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

  async fail({
    key,
    partition,
    claimToken,
    ttlSeconds,
    forgetRun,
    leaseEndedBefore,
  }: FailInput): Promise<TransitionResult> {
    const failure = forgetRun ? FAILURE_FORGETTING_RUN : FAILURE;
    const expiresAt = this.clock.nowSeconds() + ttlSeconds;
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

  override async remove(input: RemoveInput): Promise<RemoveResult> {
    try {
      await this.calls.send('remove', new DeleteItemCommand(removeRequest(this.tableName, this.layout, input, input)));
      return { removed: true };
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
      return { removed: false, current: await this.existingAfterFailedCondition(input, error) };
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
