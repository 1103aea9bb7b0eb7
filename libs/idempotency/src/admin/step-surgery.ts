import { IdempotencyRecord, inRecordedOrder, StoredResponse } from '../repository/idempotency.record';
import { ReviseStepsInput } from '../repository/idempotency.repository';
import { ResponseSealer, stepSealKey } from '../response/response-sealing';
import { encodeTyped } from '../response/typed-value';

/**
 * Step surgery (`keys:restart --from-step`, `keys:resolve-step`): an operator repairs one request's steps, as
 * Cloudflare Workflows restarts an instance from a step and Temporal resets a workflow. Each is one write conditioned on
 * the record as the command read it (its claim token and status; a PENDING one only past its lease: never a live
 * owner's), and releases the key, so that the next retry continues from there.
 */

/** How a started at-most-once step is settled: it had its effect (`done`, its result), or it did not. */
export type StepResolution = { done: unknown } | { notDone: true };

/** A revision to write, and what it does in words; or why none is made. */
export type Surgery = { revision: Omit<ReviseStepsInput, 'ttlSeconds'>; note: string } | { refused: string };

/** Why a record cannot be operated on now, if it cannot. */
function refusal(record: IdempotencyRecord, now: number): string | undefined {
  if (record.status === 'COMPLETED') {
    return 'the key is COMPLETED: its answer is replayed, and its steps are not run again. Use keys:purge to forget it';
  }
  if (record.status === 'PENDING' && !(record.expiresAt < now)) {
    return `the key is held by a live lease (it ends in ${record.expiresAt - now} s): wait for it to end, or for its owner to finish`;
  }
  return undefined;
}

/** The record as the revision is conditioned on it. */
function readAs(record: IdempotencyRecord, now: number): Omit<ReviseStepsInput, 'ttlSeconds' | 'forget'> {
  const { key, partition, claimToken } = record;
  const status = record.status as 'PENDING' | 'FAILED';
  return { key, partition, claimToken, status, ...(status === 'PENDING' ? { leaseEndedBefore: now } : {}) };
}

/**
 * `keys:restart --from-step NAME`: forgets the step and every step recorded after it (the next run runs them again,
 * their effects too), and releases the key. The starts of other at-most-once steps are kept: they are never run blindly.
 */
export function restartFromStep(record: IdempotencyRecord, name: string, now: number): Surgery {
  const refused = refusal(record, now);
  if (refused) return { refused };
  const recorded = [...(record.steps ?? [])].sort(inRecordedOrder);
  const at = recorded.findIndex((step) => step.name === name);
  const started = record.startedSteps?.some((step) => step.name === name) ?? false;
  if (at < 0 && !started) return { refused: `the request has no step ${JSON.stringify(name)}: ${known(record)}` };
  const forget = at < 0 ? [name] : recorded.slice(at).map((step) => step.name);
  if (started && at >= 0) forget.push(name);
  const note = `restarted from step ${JSON.stringify(name)}: ${forget.map((each) => JSON.stringify(each)).join(', ')} forgotten; the next request runs them again (their effects too)`;
  return { revision: { ...readAs(record, now), forget }, note };
}

/**
 * `keys:resolve-step NAME --done JSON | --not-done`: settles an at-most-once step whose outcome is unknown (started, not
 * recorded). Done: its result is recorded as if the function had returned it, and the next retry continues after it.
 * Not done: its start is forgotten, and the next retry runs the function (as attempt 1 again).
 */
export function resolveStep(
  record: IdempotencyRecord,
  name: string,
  resolution: StepResolution,
  now: number,
  sealer?: ResponseSealer,
): Surgery {
  const refused = refusal(record, now);
  if (refused) return { refused };
  const started = record.startedSteps?.find((step) => step.name === name);
  if (!started) {
    return {
      refused: `the request has no started, unrecorded step ${JSON.stringify(name)} to settle: ${known(record)}`,
    };
  }
  if ('notDone' in resolution) {
    const note = `step ${JSON.stringify(name)} settled as not done: the next request runs it`;
    return { revision: { ...readAs(record, now), forget: [name] }, note };
  }
  const encoded: StoredResponse = {
    statusCode: 200,
    headers: {},
    body: encodeTyped(resolution.done, `the result given for step(${JSON.stringify(name)})`),
    bodyEncoding: 'typed',
  };
  const result = sealer ? sealer.seal(stepSealKey(record.key, name), encoded) : encoded;
  const settle = { name, result, attempt: started.attempt, run: started.run, seq: record.steps?.length ?? 0 };
  const note = `step ${JSON.stringify(name)} settled as done: the next request continues after it with the result given`;
  return { revision: { ...readAs(record, now), forget: [], settle }, note };
}

/** The steps a record holds, in words (for a refusal). */
function known(record: IdempotencyRecord): string {
  const recorded = (record.steps ?? []).map((step) => `${JSON.stringify(step.name)} (recorded)`);
  const started = (record.startedSteps ?? []).map((step) => `${JSON.stringify(step.name)} (started, not recorded)`);
  const all = [...recorded, ...started];
  return all.length > 0 ? `it has ${all.join(', ')}` : 'it has none';
}
