import {
  IdempotencyRecord,
  IdempotencyStatus,
  inRecordedOrder,
  isFinalFailure,
  omittedInWords,
  RecordedStep,
  StoredResponse,
} from '../repository/idempotency.record';
import { RecordLocation } from '../repository/idempotency.repository';
import { ResponseSealer, stepSealKey } from '../response/response-sealing';

/** Which final failure a record is (a FAILED record that keeps its problem as the answer), if it is one. */
export function finalFailureKind(record: IdempotencyRecord): 'key-poisoned' | 'step-outcome-unknown' | undefined {
  if (!isFinalFailure(record)) return undefined;
  const type = (record.response?.body as { type?: unknown } | undefined)?.type;
  return type === 'step-outcome-unknown' ? type : 'key-poisoned';
}

/** A record's state as an operator reads it: times as epoch seconds and ISO text, never the body unless asked. */
export interface RecordReport extends RecordLocation {
  status: IdempotencyStatus;
  claimToken: string;
  fingerprint: string;
  pendingSince: string;
  expiresAt: string;
  /** Seconds until `expiresAt` (negative once past). */
  expiresInSeconds: number;
  completedAt?: string;
  /** The stored answer's status, and its size as stored (bytes); whether it is sealed (`encryption`). */
  storedStatus?: number;
  storedBytes?: number;
  sealed: boolean;
  /** Only with `showBody`, and only what the configured encryption keys can open. */
  body?: unknown;
  /** The recovery points recorded for the request (`IdempotencyContext.step`), in the order they were recorded. */
  steps?: StepReport[];
  /** Which process claimed it: `host:pid`, or `lambda:<request id>` (when the store keeps it). */
  holder?: string;
  /**
   * The processes that claimed it since its last clean end, oldest first (when the store keeps them): each but the
   * last crashed on it. With `maxCrashedOwners` of them crashed, the next takeover poisons the key.
   */
  owners?: string[];
  /** Set on a poisoned key (FAILED, final): what its duplicates are answered, and how to let it run again. */
  poisoned?: string;
  /** Set on a key whose at-most-once step's outcome is unknown (FAILED, final): the step, and how to settle it. */
  stepOutcomeUnknown?: string;
  /** The version of the handler whose claim wrote it (`@Idempotent({ version })`), when it had one. */
  handlerVersion?: string;
  /** The at-most-once steps started and not recorded (their function may or may not have had its effect). */
  startedSteps?: { name: string; startedAt: string; attempt: number }[];
  /** PENDING: when its owner last renewed the lease (its claim's time until a first renewal). */
  renewedAt?: string;
  /** PENDING: whether its owner looks alive, in one line, and what the next request will do. */
  owner?: string;
}

/** One recorded step: its result only with `showBody` (in the typed encoding, opened when sealed). */
export interface StepReport {
  name: string;
  recordedAt: string;
  /** The `attempt` its function ran as when it was recorded. */
  attempt: number;
  /** The claim (run) of the record that recorded it. */
  run?: number;
  /** Its size as stored, in bytes. */
  bytes?: number;
  result?: unknown;
}

/**
 * A record as an operator reads it (`keys:inspect`, `keys:list`, an admin command's answer): times as ISO text, the
 * body only with `showBody`, opened when sealed and the `sealer` can open it.
 */
export function reportRecord(
  record: IdempotencyRecord,
  { now, sealer, showBody = false }: { now: number; sealer?: ResponseSealer; showBody?: boolean },
): RecordReport {
  const iso = (seconds: number) => new Date(seconds * 1000).toISOString();
  const response: StoredResponse | undefined = record.response;
  const report: RecordReport = {
    key: record.key,
    ...(record.partition === undefined ? {} : { partition: record.partition }),
    status: record.status,
    claimToken: record.claimToken,
    fingerprint: record.fingerprint,
    pendingSince: iso(record.pendingSince),
    expiresAt: iso(record.expiresAt),
    expiresInSeconds: record.expiresAt - now,
    ...(record.completedAt === undefined ? {} : { completedAt: iso(record.completedAt) }),
    ...(response ? { storedStatus: response.statusCode } : {}),
    ...(record.responseBytes === undefined ? {} : { storedBytes: record.responseBytes }),
    sealed: response?.sealed !== undefined,
    ...(record.holder === undefined ? {} : { holder: record.holder }),
    ...(record.owners === undefined ? {} : { owners: record.owners }),
    ...(record.version === undefined ? {} : { handlerVersion: record.version }),
  };
  const final = finalFailureKind(record);
  if (final === 'step-outcome-unknown') {
    const step = JSON.stringify((response!.body as { step?: unknown }).step);
    report.stepOutcomeUnknown =
      `every request with this key is answered 500 step-outcome-unknown: the at-most-once step ${step} was interrupted ` +
      `and nothing could tell whether it had its effect. Check the other system, then keys:resolve-step ${step} --done JSON or --not-done`;
  } else if (final === 'key-poisoned') {
    report.poisoned =
      'every request with this key is answered 500 key-poisoned, the handler not run: its owners crashed on it. ' +
      'Fix the cause, then keys:release lets it run again';
  }
  if (record.startedSteps?.length) {
    report.startedSteps = record.startedSteps.map(({ name, startedAt, attempt }) => ({
      name,
      startedAt: iso(startedAt),
      attempt,
    }));
  }
  if (record.status === 'PENDING') {
    report.renewedAt = iso(record.renewedAt ?? record.pendingSince);
    report.owner = ownerInWords(record, now);
  }
  if (showBody && response) report.body = opened(sealer, record.key, response);
  if (record.steps?.length)
    report.steps = [...record.steps]
      .sort(inRecordedOrder)
      .map((step) => stepReport(sealer, record.key, step, showBody));
  return report;
}

/**
 * Whether a PENDING record's owner looks alive, from its last renewal: a live owner renews every third of its lease
 * (the lease is what a renewal adds: `expiresAt` less the renewal's time), so a renewal older than that, with a few
 * seconds of grace, means a paused or dead owner.
 */
function ownerInWords(record: IdempotencyRecord, now: number): string {
  const renewed = record.renewedAt ?? record.pendingSince;
  const lease = Math.max(1, record.expiresAt - renewed);
  const every = Math.max(1, Math.round(lease / 3));
  const since = Math.max(0, now - renewed);
  const by = record.holder ? ` by ${record.holder}` : '';
  const last =
    record.renewedAt === undefined ? `claimed ${since} s ago${by}, not renewed since` : `renewed ${since} s ago${by}`;
  if (record.expiresAt < now) {
    return `the owner looks dead: its lease ended ${now - record.expiresAt} s ago (${last}); the next request takes the key over (once clockSkewSeconds have passed too), resuming the same request's recorded steps`;
  }
  if (since <= every + LIVENESS_GRACE_SECONDS) {
    const confirm = record.holder
      ? `; a killed owner looks alive too until a renewal is overdue: to be sure, check that ${record.holder} (host:pid, or lambda:request id) still runs`
      : '';
    return `the owner looks alive: ${last}, a live owner renews about every ${every} s; the lease ends in ${record.expiresAt - now} s unless renewed${confirm}`;
  }
  return `the owner looks paused or dead: ${last}, though a live owner renews about every ${every} s; its lease ends in ${record.expiresAt - now} s, then the next request takes the key over (keys:release frees it now)`;
}

/** Seconds a renewal may come late (a slow store call, a busy event loop) before the owner is called not alive. */
const LIVENESS_GRACE_SECONDS = 5;

function stepReport(sealer: ResponseSealer | undefined, key: string, step: RecordedStep, showBody: boolean) {
  const { name, recordedAt, attempt, run, bytes } = step;
  const report: StepReport = { name, recordedAt: new Date(recordedAt * 1000).toISOString(), attempt, run, bytes };
  if (showBody) report.result = opened(sealer, stepSealKey(key, name), step.result);
  return report;
}

/** The stored body, opened when sealed; what the configured keys cannot open is said, not shown. */
function opened(sealer: ResponseSealer | undefined, key: string, response: StoredResponse): unknown {
  let stored = response;
  if (response.sealed !== undefined) {
    if (!sealer) return '(sealed: give the encryption keys to open it)';
    try {
      stored = sealer.open(key, response);
    } catch (error) {
      return `(sealed: the configured keys cannot open it: ${(error as Error).message})`;
    }
  }
  if (stored.bodyOmitted) return `(not stored: ${omittedInWords(stored.omittedBecause)})`;
  return stored.bodyBase64 !== undefined
    ? { base64: stored.bodyBase64, type: stored.bodyType ?? 'Buffer' }
    : stored.body;
}
