/** The life of a key: PENDING while one caller runs the handler, then COMPLETED or FAILED. */
export type IdempotencyStatus = 'PENDING' | 'COMPLETED' | 'FAILED';

/** What a replay needs: the first response's status, allow-listed headers and body. */
export interface StoredResponse {
  statusCode: number;
  /** Allow-listed headers; a header sent more than once keeps its separate values. */
  headers: Record<string, string | string[]>;
  /** The JSON value the handler returned; absent when it returned `undefined`. */
  body?: unknown;
  /**
   * `typed`: `body` is in the typed encoding of recorded values (a function's or a message handler's result: Dates,
   * Maps, BigInts… come back as themselves). Absent: `body` is the JSON that was sent.
   */
  bodyEncoding?: 'typed';
  /** A binary body (Buffer, typed array, ArrayBuffer, a `StreamableFile`'s bytes), base64-encoded. */
  bodyBase64?: string;
  /** What `bodyBase64` was handed to the platform as, so a replay is sent the same way. Absent: a Buffer. */
  bodyType?: BinaryBodyType;
  /** The options of a `StreamableFile` body (type, disposition, length). */
  fileOptions?: Record<string, unknown>;
  /**
   * Set when the outcome was a thrown exception that `storeIf` made final: its class name (`NotFoundException`,
   * `HttpException`, `RpcException`); `statusCode` is its status and `body` its response. A replay throws it again.
   */
  exception?: string;
  /**
   * With `encryption`: everything but `statusCode` (headers, body, …), sealed with AES-256-GCM, base64. The other
   * fields are then absent.
   */
  sealed?: string;
  /**
   * Set instead of a body when the response could not be stored (`omittedBecause` says why): the key stays used (no
   * second execution), but duplicates get a problem response, not a replay.
   */
  bodyOmitted?: true;
  /** Why the body was not stored (absent on records stored before the reason was kept). */
  omittedBecause?: OmittedReason;
}

/**
 * Why a response was stored without its body: it did not fit in the item even compressed (`too-large`), it was a
 * stream (`stream`), JSON cannot write it (`not-json`: a cycle, a BigInt, a serializer that threw), or the handler sent
 * it itself (`sent-by-handler`: `@Res()`), so the module never saw it.
 */
export type OmittedReason = 'too-large' | 'stream' | 'not-json' | 'sent-by-handler';

/** Why a body was not stored, in words, for problems, logs and `keys:inspect` (a record without a reason: older). */
export function omittedInWords(reason: OmittedReason | undefined): string {
  return reason ? OMITTED_BECAUSE[reason] : 'it could not be stored (too large, or not JSON)';
}

const OMITTED_BECAUSE: Record<OmittedReason, string> = {
  'too-large': 'it was too large to store, even compressed',
  stream: 'it was a stream, which is sent once and not kept',
  'not-json': 'it cannot be written as JSON (a cycle, a BigInt, or its serializer threw)',
  'sent-by-handler': 'the handler sent it itself (@Res()), so the module never saw it',
};

/** The binary types a handler may return, by constructor name. */
export type BinaryBodyType =
  | 'Buffer'
  | 'StreamableFile'
  | 'ArrayBuffer'
  | 'DataView'
  | 'Uint8Array'
  | 'Uint8ClampedArray'
  | 'Int8Array'
  | 'Uint16Array'
  | 'Int16Array'
  | 'Uint32Array'
  | 'Int32Array'
  | 'Float32Array'
  | 'Float64Array'
  | 'BigInt64Array'
  | 'BigUint64Array';

/** One stored item, as the repository hands it to the interceptor. */
export interface IdempotencyRecord {
  /** The record key (scope, operation and key, hashed). */
  key: string;
  /** In a sort-key layout, the partition the record is in. */
  partition?: string;
  status: IdempotencyStatus;
  /** Epoch seconds: lease end while PENDING, retention end once COMPLETED or FAILED. */
  expiresAt: number;
  /** Written by the claim that owns this record; every later transition is conditioned on it. */
  claimToken: string;
  /** SHA-256 of the canonical request. */
  fingerprint: string;
  /** Epoch seconds. */
  pendingSince: number;
  /** The process whose claim wrote the record (`ClaimInput.holder`), when the store keeps it. */
  holder?: string;
  /**
   * The processes that claimed the record since its last clean end (a completion, or an owner's release after its work
   * ended), oldest first, when the store keeps them: each but the last neither completed nor released it (it crashed,
   * or its lease ran out). A claim that takes over a lease counts them against `maxCrashedOwners`.
   */
  owners?: string[];
  /** The version of the code whose claim wrote the record (`@Idempotent({ version })`), when it had one. */
  version?: string;
  /** Epoch seconds: the owner's last lease renewal, when it renewed at least once (else it claimed at `pendingSince`). */
  renewedAt?: number;
  /** Epoch seconds. */
  completedAt?: number;
  response?: StoredResponse;
  /** The stored response's size in the store, in bytes (compressed or sealed as stored), when it was read. */
  responseBytes?: number;
  /** The recovery points recorded for this request (`IdempotencyContext.step`), when the record was read whole. */
  steps?: RecordedStep[];
  /**
   * The at-most-once steps (`semantics: 'at-most-once'`) a run started and did not record: their function may or may
   * not have had its effect. Kept with the steps; a step's result replaces its start.
   */
  startedSteps?: StartedStep[];
  /**
   * The runs of this request that may have started a step they did not record, when known: each claim adds one, and a
   * run released after recording every step it started takes itself off (a step's `attempt` counts these runs).
   */
  runs?: number;
}

/**
 * One recovery point of a record (`IdempotencyContext.step`): the result a step's function returned the first time it
 * completed for this request, in the typed encoding (`bodyEncoding: 'typed'`; sealed with `encryption`).
 */
export interface RecordedStep {
  name: string;
  result: StoredResponse;
  /** Epoch seconds. */
  recordedAt: number;
  /** The `attempt` its function ran as when it was recorded. */
  attempt: number;
  /** The claim (run) of the record that recorded it: 1 for the first run. */
  run: number;
  /** Its place among the request's recorded steps, 0 for the first (absent on steps recorded before it was kept). */
  seq?: number;
  /** Its size in the store, in bytes, when it was read. */
  bytes?: number;
}

/** Recorded steps in the order they were recorded: by run, then by place (`seq`), then by time. */
export function inRecordedOrder(a: RecordedStep, b: RecordedStep): number {
  return a.run - b.run || (a.seq ?? 0) - (b.seq ?? 0) || a.recordedAt - b.recordedAt;
}

/**
 * The start of an at-most-once step (`IdempotencyContext.step(name, fn, { semantics: 'at-most-once' })`), recorded
 * before its function ran: a later run that finds it without a result does not run the function blindly.
 */
export interface StartedStep {
  name: string;
  /** Epoch seconds. */
  startedAt: number;
  /** The `attempt` its function was started as. */
  attempt: number;
  /** The claim (run) of the record that started it. */
  run: number;
}

/**
 * True when a record no longer blocks a claim: a failed attempt, a completed one or a final failure (`isFinalFailure`)
 * past its retention (`expiresAt`), or a lease (PENDING) whose end is more than `clockSkewSeconds` in the past: the
 * margin by which this process's clock may run ahead of the owner's, so a live owner is never taken over.
 */
export function isClaimable(
  record: Pick<IdempotencyRecord, 'status' | 'expiresAt'> & { response?: unknown },
  nowSeconds: number,
  clockSkewSeconds = 0,
): boolean {
  if (record.status === 'FAILED' && record.response === undefined) return true;
  return record.expiresAt < nowSeconds - (record.status === 'PENDING' ? clockSkewSeconds : 0);
}

/**
 * Whether a claim for a request (its `fingerprint`) may take the record over: `isClaimable`, except that a released
 * record that holds recorded (or started) steps (a FAILED attempt, an MCP call waiting for its user's input) stays its request's
 * until it expires: another request under the key is refused as a mismatch, never run over the first one's recorded
 * effects (which its re-sent call would then find gone).
 */
export function claimableBy(
  record: Pick<IdempotencyRecord, 'status' | 'expiresAt' | 'fingerprint' | 'steps' | 'startedSteps'> & {
    response?: unknown;
  },
  fingerprint: string,
  nowSeconds: number,
  clockSkewSeconds = 0,
): boolean {
  if (!isClaimable(record, nowSeconds, clockSkewSeconds)) return false;
  const held = (record.steps?.length ?? 0) + (record.startedSteps?.length ?? 0) > 0;
  const heldSteps = record.status === 'FAILED' && held && record.expiresAt >= nowSeconds;
  return !heldSteps || record.fingerprint === fingerprint;
}

/**
 * What a versioned claim does with the record it would resume (`onVersionChange`, default 'refuse'), when the record
 * holds steps of another version; undefined when it resumes it as it is.
 */
export function versionChange(
  { version, onVersionChange = 'refuse' }: { version?: string; onVersionChange?: 'refuse' | 'resume' | 'restart' },
  record: Pick<IdempotencyRecord, 'steps' | 'startedSteps' | 'version'> | undefined,
): 'refuse' | 'restart' | undefined {
  if (version === undefined || onVersionChange === 'resume' || !record) return undefined;
  return holdsStepsOfAnotherVersion(record, version) ? onVersionChange : undefined;
}

/**
 * Whether a claim of `version` would resume steps another version of the code recorded or started: the record holds
 * steps and was written by another version (or by none). A claim without a version never asks.
 */
export function holdsStepsOfAnotherVersion(
  record: Pick<IdempotencyRecord, 'steps' | 'startedSteps' | 'version'>,
  version: string,
): boolean {
  const held = (record.steps?.length ?? 0) + (record.startedSteps?.length ?? 0) > 0;
  return held && record.version !== version;
}

/**
 * A FAILED record that carries a response is a final failure (a poisoned key): its problem is the answer to every
 * duplicate until it expires or an operator releases it; a FAILED record without one is claimable at once.
 */
export function isFinalFailure(record: Pick<IdempotencyRecord, 'status'> & { response?: unknown }): boolean {
  return record.status === 'FAILED' && record.response !== undefined;
}
