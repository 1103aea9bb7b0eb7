import { randomUUID } from 'node:crypto';
import { stepEntryBytes } from '../response/step-value';
import type { ReviseStepsInput } from './store-inputs';
import {
  IdempotencyRecord,
  IdempotencyStatus,
  inRecordedOrder,
  RecordedStep,
  StartedStep,
  StoredResponse,
} from './idempotency.record';

/**
 * How `InMemoryIdempotencyRepository` keeps a record, and hands out copies of it. A record as kept: its response as
 * JSON text, its steps as JSON text by name. `dropped` once it is no longer its key's record (claimed again over it,
 * or removed): its write-order entry is then skipped without a lookup.
 */
export type StoredRecord = Omit<IdempotencyRecord, 'response' | 'steps' | 'startedSteps'> & {
  response?: string;
  steps?: Map<string, string>;
  dropped?: true;
};

/** What a kept record and a record handed out have in common. */
type RecordFields = Omit<IdempotencyRecord, 'response' | 'responseBytes' | 'steps' | 'startedSteps'>;

/**
 * A record written out field by field, the optional ones set only when present: in V8, adding fields to an object made
 * by a spread (`{ ...record, status }`) is a slow path, about 2 µs each time, more than the rest of a write.
 */
export function storedRecord(
  key: string,
  partition: string | undefined,
  status: IdempotencyStatus,
  expiresAt: number,
  claimToken: string,
  fingerprint: string,
  pendingSince: number,
): RecordFields {
  const record: RecordFields = { key, status, expiresAt, claimToken, fingerprint, pendingSince };
  if (partition !== undefined) record.partition = partition;
  return record;
}

/** A copy of a kept record, its response parsed unless `listed` (a scan: state only), its steps parsed. */
export function readRecord(stored: StoredRecord, listed = false): IdempotencyRecord {
  const { key, partition, status, expiresAt, claimToken, fingerprint, pendingSince, completedAt, response } = stored;
  const record: IdempotencyRecord = storedRecord(
    key,
    partition,
    status,
    expiresAt,
    claimToken,
    fingerprint,
    pendingSince,
  );
  if (completedAt !== undefined) record.completedAt = completedAt;
  if (stored.holder !== undefined) record.holder = stored.holder;
  if (stored.owners !== undefined) record.owners = [...stored.owners];
  if (stored.renewedAt !== undefined) record.renewedAt = stored.renewedAt;
  if (stored.version !== undefined) record.version = stored.version;
  if (listed) return record;
  if (response !== undefined) {
    record.response = JSON.parse(response) as StoredResponse;
    record.responseBytes = Buffer.byteLength(response);
  }
  if (stored.runs !== undefined) record.runs = stored.runs;
  if (stored.steps) {
    const { steps, startedSteps } = readSteps(stored.steps);
    record.steps = steps;
    if (startedSteps.length > 0) record.startedSteps = startedSteps;
  }
  return record;
}

/**
 * Kept steps as recorded steps, in the order they were recorded, each measured as every store measures it; and the
 * at-most-once steps started without a result (kept under their name until their result replaces them).
 */
export function readSteps(steps: Map<string, string>): { steps: RecordedStep[]; startedSteps: StartedStep[] } {
  const recorded: RecordedStep[] = [];
  const startedSteps: StartedStep[] = [];
  for (const json of steps.values()) {
    const step = JSON.parse(json) as RecordedStep | StartedStep;
    if ('result' in step) recorded.push({ ...step, bytes: stepEntryBytes(step.name, step.result) });
    else startedSteps.push(step);
  }
  return { steps: recorded.sort(inRecordedOrder), startedSteps };
}

/**
 * Claim tokens of this process's in-memory stores: a random prefix and a count. A token only has to differ from every
 * other of its store (which no other process shares), and this needs no random bytes per claim.
 */
const CLAIM_TOKEN_PREFIX = `${randomUUID().slice(0, 8)}-`;
let claimTokens = 0;

export function nextClaimToken(): string {
  return CLAIM_TOKEN_PREFIX + (++claimTokens).toString(36);
}

/** The segment of a parallel scan a record key falls in (its hash's last hex digits, as DynamoDB spreads keys). */
export function segmentOf(key: string, total: number): number {
  return parseInt(key.slice(-6), 16) % total || 0;
}

/** Records past their `expiresAt` looked at per write, oldest written first: eviction keeps pace with writes. */
export const EXPIRED_CHECKED_PER_WRITE = 2;

/** Entries no longer kept that the finished list may hold before it is cut down. */
export const COMPACT_AFTER = 1024;

/** Whether an operator's revision applies: the record as it was read, a PENDING one only past its lease. */
export function revisable(record: StoredRecord, { claimToken, status, leaseEndedBefore }: ReviseStepsInput): boolean {
  if (record.claimToken !== claimToken || record.status !== status) return false;
  return status !== 'PENDING' || record.expiresAt < (leaseEndedBefore ?? Number.NEGATIVE_INFINITY);
}

/** An operator's revision of a kept record (`ReviseStepsInput`): released, its steps revised, a final failure reopened. */
export function revise(record: StoredRecord, { forget, settle, ttlSeconds }: ReviseStepsInput, now: number): void {
  record.status = 'FAILED';
  record.expiresAt = now + ttlSeconds;
  delete record.response;
  for (const name of forget) record.steps?.delete(name);
  if (settle) (record.steps ??= new Map()).set(settle.name, JSON.stringify({ ...settle, recordedAt: now }));
}
