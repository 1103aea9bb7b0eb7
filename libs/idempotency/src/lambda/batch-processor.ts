import { Logger } from '@nestjs/common';
import {
  IdempotencyKeyPoisonedError,
  IdempotencyRecordUnreadableError,
  IdempotencyResultNotStoredError,
} from '../errors/idempotency.errors';
import { CallSettings } from '../options/route-settings';
import type { IdempotencyContext } from '../protocol/idempotency-context';
import type { ExecuteOptions, IdempotencyService } from '../protocol/idempotency.service';
import { BatchRecord, batchSource, BatchSource, checkRecords, messageAttribute } from './batch-records';
import { LambdaContextLike, withLambdaContext } from './lambda-invocation';

/** Options of `processBatch`: the records' operation and how each is keyed, and the calls' settings. */
export interface BatchOptions<T extends BatchRecord = BatchRecord> extends CallSettings {
  /** The application's `IdempotencyService` (`app.get(IdempotencyService)`). */
  idempotency: IdempotencyService;
  /** What the records are for (`'charge-payments'`): part of every record's key, as `execute()`'s `operation`. */
  operation: string;
  /**
   * Each record's key: by default the SQS message id, or the Kinesis or DynamoDB Streams event id (one per record, the
   * same on every redelivery). A function of the record, for a key the producer set (a duplicate sent twice gets two
   * message ids).
   */
  key?: (record: T) => string | number | undefined;
  /** SQS: the key from this message attribute (e.g. `'Idempotency-Key'`), instead of the message id. */
  keyAttribute?: string;
  /** What makes two deliveries of one key the same: by default the body (Kinesis: its data; streams: the change). */
  fingerprint?: (record: T) => unknown;
  /** A namespace for the keys (a tenant, a consumer). */
  scope?: string | number;
  /** How many records (FIFO: message groups) run at once. Default 1: one after another, in the event's order. */
  concurrency?: number;
  /** A record starts only while the invocation has at least this long left (ms). Default 1000. */
  minRemainingMs?: number;
}

/** What a Lambda function with `ReportBatchItemFailures` answers: the records to deliver again. */
export interface BatchResponse {
  batchItemFailures: { itemIdentifier: string }[];
}

const logger = new Logger('Idempotency');

/**
 * Runs each record of an SQS (standard or FIFO), Kinesis or DynamoDB Streams batch once, under its own key
 * (`IdempotencyService.execute`), and answers the partial batch response: every record not completed, so one never
 * attempted is always delivered again:
 * - a record already completed is skipped (its stored result stands, even one that could not be stored); one held by
 *   another consumer, one whose handler threw and one that cannot be keyed are reported, so the source delivers them
 *   again: never run twice, never failing the whole batch;
 * - no record starts with less than `minRemainingMs` of the invocation left: those are reported as failures;
 * - SQS FIFO: after a failure in a message group the rest of that group is reported too (its order kept), other groups
 *   go on; Kinesis and DynamoDB Streams: the first failure is reported and the records after it are not started (the
 *   source resumes from that sequence number);
 * - with `context`, the batch runs as `withLambdaContext` runs an invocation: leases end by the deadline, the holder
 *   is the request id.
 *
 * The options and every record are checked first: an option that is not usable (a `concurrency` of NaN, 0 or a string)
 * or a record without the field its source is read by is a `TypeError`, and no record runs.
 *
 * @example
 * ```ts
 * export const handler = async (event: SQSEvent, context: Context) =>
 *   processBatch(event, context, (record) => payments.charge(JSON.parse(record.body)), {
 *     idempotency: (await app()).get(IdempotencyService),
 *     operation: 'charge-payments',
 *   });
 * ```
 */
export async function processBatch<T extends BatchRecord, R>(
  event: { Records: T[] },
  context: LambdaContextLike | undefined,
  handler: (record: T, idempotency: IdempotencyContext) => R | Promise<R>,
  options: BatchOptions<T>,
): Promise<BatchResponse> {
  if (typeof options?.idempotency?.execute !== 'function') {
    throw new TypeError('processBatch needs options.idempotency: the application’s IdempotencyService');
  }
  if (typeof options.operation !== 'string' || options.operation === '') {
    throw new TypeError("processBatch needs options.operation, what the records are for (e.g. 'charge-payments')");
  }
  if (typeof handler !== 'function') throw new TypeError('processBatch needs a handler: (record, context) => …');
  const records = event?.Records;
  const source = batchSource(records) as BatchSource<T>;
  checkBatchOptions(options, source);
  checkRecords(records, source, { key: !!(options.key || options.keyAttribute), fingerprint: !!options.fingerprint });
  const work = () => new Batch(source, context, handler, options).run(records);
  return context ? withLambdaContext(work)(event, context) : work();
}

/** `processBatch`'s own options and the call settings, each a `TypeError` naming it (never a batch that runs nothing). */
function checkBatchOptions(options: BatchOptions<never>, source: BatchSource): void {
  const { concurrency, minRemainingMs, key, keyAttribute, fingerprint, scope } = options;
  const refuse = (name: string, what: string, value: unknown) => {
    const shown = typeof value === 'number' || value === undefined ? String(value) : JSON.stringify(value);
    throw new TypeError(`processBatch: options.${name} must be ${what}, got ${shown}`);
  };
  if (concurrency !== undefined && !(Number.isInteger(concurrency) && concurrency >= 1)) {
    refuse('concurrency', 'a whole number ≥ 1', concurrency);
  }
  if (minRemainingMs !== undefined && !(Number.isFinite(minRemainingMs) && minRemainingMs >= 0)) {
    refuse('minRemainingMs', 'a number of milliseconds ≥ 0', minRemainingMs);
  }
  if (key !== undefined && typeof key !== 'function') refuse('key', 'a function of the record', key);
  if (fingerprint !== undefined && typeof fingerprint !== 'function') {
    refuse('fingerprint', 'a function of the record', fingerprint);
  }
  if (keyAttribute !== undefined && (typeof keyAttribute !== 'string' || keyAttribute === '')) {
    refuse('keyAttribute', "an SQS message attribute's name", keyAttribute);
  }
  if (keyAttribute !== undefined && !source.kind.startsWith('sqs')) {
    refuse('keyAttribute', `left out for ${source.kind} records (it reads SQS message attributes)`, keyAttribute);
  }
  const usableScope = typeof scope === 'string' || (typeof scope === 'number' && Number.isFinite(scope));
  if (scope !== undefined && !usableScope) refuse('scope', 'a string or a number', scope);
  options.idempotency.checkOptions(options);
}

class Batch<T extends BatchRecord, R> {
  private readonly completed = new Set<T>();

  constructor(
    private readonly source: BatchSource<T>,
    private readonly context: LambdaContextLike | undefined,
    private readonly handler: (record: T, idempotency: IdempotencyContext) => R | Promise<R>,
    private readonly options: BatchOptions<T>,
  ) {}

  async run(records: T[]): Promise<BatchResponse> {
    const lanes = this.lanes(records);
    const concurrency = this.options.concurrency ?? 1;
    let next = 0;
    const worker = async () => {
      while (next < lanes.length) await this.runLane(lanes[next++]);
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, lanes.length) }, worker));
    // What was done, not what was marked failed: a record never attempted is always delivered again.
    const batchItemFailures = records
      .filter((record) => !this.completed.has(record))
      .map((record) => ({ itemIdentifier: this.source.itemIdentifier(record) }));
    return { batchItemFailures };
  }

  /** The sequences whose order counts: each record alone (SQS), each message group (FIFO), the shard (streams). */
  private lanes(records: T[]): T[][] {
    const { kind, group } = this.source;
    if (kind === 'sqs') return records.map((record) => [record]);
    if (kind !== 'sqs-fifo' || !group) return records.length > 0 ? [records] : [];
    const groups = new Map<string, T[]>();
    for (const record of records) groups.set(group(record), [...(groups.get(group(record)) ?? []), record]);
    return [...groups.values()];
  }

  /**
   * Runs a lane's records in order, until one is not completed: the rest of a FIFO group or a stream is not started
   * (and so reported); SQS lanes are one record each.
   */
  private async runLane(lane: T[]): Promise<void> {
    for (const record of lane) {
      if (!(await this.runRecord(record))) return;
      this.completed.add(record);
    }
  }

  private async runRecord(record: T): Promise<boolean> {
    const item = this.source.itemIdentifier(record);
    const remainingMs = this.context?.getRemainingTimeInMillis?.();
    const minRemainingMs = this.options.minRemainingMs ?? 1000;
    if (remainingMs !== undefined && remainingMs < minRemainingMs) {
      logger.warn({ msg: `record not started: ${remainingMs} ms left of the invocation`, item });
      return false;
    }
    try {
      await this.options.idempotency.execute(this.callOf(record), (context) => this.handler(record, context));
      return true;
    } catch (error) {
      // Completed before, its result not stored or not readable: a batch returns no result, so the record is done.
      if (error instanceof IdempotencyResultNotStoredError || error instanceof IdempotencyRecordUnreadableError) {
        logger.log({ msg: 'record completed before (its result was not kept for replay): skipped', item });
        return true;
      }
      // Poisoned (its handler crashed `maxCrashedOwners` containers): still a failure, never dropped as done, so that the
      // queue's redrive policy moves it to its dead-letter queue (SQS) or the stream's on-failure destination takes it.
      if (error instanceof IdempotencyKeyPoisonedError) {
        logger.error({
          msg: 'record poisoned (its handler is not run); reported until the redrive policy moves it',
          item,
        });
        return false;
      }
      logger.warn({ msg: 'record failed; reported for redelivery', item, error: String(error) });
      return false;
    }
  }

  /** The record's call: its key and fingerprint (by default its source's), the batch's settings. */
  private callOf(record: T): ExecuteOptions {
    const { operation, key, keyAttribute, fingerprint, scope } = this.options;
    const { ttlSeconds, pendingTtlSeconds, maxLeaseSeconds, maxCrashedOwners, retryAfterSeconds, waitMs, mode } =
      this.options;
    const recordKey = key
      ? key(record)
      : keyAttribute
        ? messageAttribute(record, keyAttribute)
        : this.source.defaultKey(record);
    return {
      operation,
      transport: this.source.transport,
      key: recordKey as string,
      scope,
      fingerprint: fingerprint ? fingerprint(record) : this.source.defaultFingerprint(record),
      ...{ ttlSeconds, pendingTtlSeconds, maxLeaseSeconds, maxCrashedOwners, retryAfterSeconds, waitMs, mode },
    };
  }
}
