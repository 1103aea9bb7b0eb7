import { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { gunzipSync } from 'node:zlib';
import { inRecordedOrder, RecordedStep, StartedStep, StoredResponse } from '../repository/idempotency.record';
import { stepNameOf, stepValue } from '../response/step-value';

/**
 * A recorded step as the record's `steps` map keeps it, under its name (`stepKey`): its result's typed JSON as `value` (gzipped, B,
 * above 0.7 KB), or the sealed envelope as `sealed` (`encryption`); when it was recorded (`at`), its `attempt` and the
 * `run` that recorded it. Only the value is stored, not a whole stored response: each later write of the record is
 * billed on it.
 */
export interface StepItem {
  value?: string | Uint8Array;
  sealed?: string;
  at: number;
  attempt: number;
  run: number;
  seq?: number;
  /** 1 on the start of an at-most-once step (no value yet): `at` is when it started. */
  started?: number;
}

/** A map attribute (a recorded step, the empty map of steps), already in DynamoDB's form. */
export class MapValue {
  constructor(readonly entries: Record<string, AttributeValue>) {}
}

/** A step's entry in the `steps` map. */
export function stepItem({ result, recordedAt, attempt, run, seq }: Omit<RecordedStep, 'bytes' | 'name'>): MapValue {
  const times: Record<string, AttributeValue> = {
    at: { N: String(recordedAt) },
    attempt: { N: String(attempt) },
    run: { N: String(run) },
  };
  if (seq !== undefined) times.seq = { N: String(seq) };
  if (result.sealed !== undefined) return new MapValue({ sealed: { S: result.sealed }, ...times });
  const stored = stepValue(result);
  return new MapValue({ value: typeof stored === 'string' ? { S: stored } : { B: stored }, ...times });
}

/** The start of an at-most-once step in the `steps` map: replaced by its result once recorded (`stepItem`). */
export function startedStepItem({ startedAt, attempt, run }: Omit<StartedStep, 'name'>): MapValue {
  return new MapValue({
    started: { N: '1' },
    at: { N: String(startedAt) },
    attempt: { N: String(attempt) },
    run: { N: String(run) },
  });
}

/** The `steps` map read: the recorded steps (`recordedSteps`), and the at-most-once steps started without a result. */
export function stepEntries(steps: Record<string, AttributeValue>): {
  steps: RecordedStep[];
  startedSteps: StartedStep[];
} {
  const entries = Object.entries(steps);
  const isStart = ([, entry]: [string, AttributeValue]) => entry.M?.started !== undefined;
  const startedSteps = entries.filter(isStart).map(([key, entry]) => {
    const { at, attempt, run } = unmarshall(entry.M ?? {}) as StepItem;
    return { name: stepNameOf(key), startedAt: Number(at), attempt: Number(attempt), run: Number(run) };
  });
  // `fromEntries` defines each name as it is (a step named `__proto__` included).
  const recorded = Object.fromEntries(entries.filter((entry) => !isStart(entry)));
  return { steps: recordedSteps(recorded), startedSteps };
}

/**
 * The `steps` map as DynamoDB returns it (not unmarshalled: `unmarshall` assigns each map key, and a step named
 * `__proto__` would vanish), in the order they were recorded. Only each step's own attributes, of fixed names, are
 * unmarshalled. Each step's `bytes` is what its entry takes of the item, as DynamoDB counts it.
 */
export function recordedSteps(steps: Record<string, AttributeValue>): RecordedStep[] {
  return Object.entries(steps)
    .map(([key, entry]) => {
      const { value, sealed, at, attempt, run, seq } = unmarshall(entry.M ?? {}) as StepItem;
      return {
        name: stepNameOf(key),
        result: stepResult(value, sealed),
        recordedAt: Number(at),
        attempt: Number(attempt),
        run: Number(run),
        ...(seq === undefined ? {} : { seq: Number(seq) }),
        bytes: Buffer.byteLength(key) + 1 + attributeBytes(entry),
      };
    })
    .sort(inRecordedOrder);
}

/**
 * An attribute value's size as DynamoDB counts it toward the 400 KB item limit: text and binary by their bytes, a map
 * or list 3 bytes and 1 per element (a map's keys by their bytes), a number at most its digits (DynamoDB: 1 byte per
 * two significant digits, plus 1).
 */
export function attributeBytes(value: AttributeValue): number {
  if (value.S !== undefined) return Buffer.byteLength(value.S);
  if (value.B !== undefined) return value.B.byteLength;
  if (value.N !== undefined) return value.N.length;
  if (value.M !== undefined) {
    let bytes = 3;
    for (const [name, member] of Object.entries(value.M)) bytes += 1 + Buffer.byteLength(name) + attributeBytes(member);
    return bytes;
  }
  if (value.L !== undefined) return value.L.reduce((bytes, member) => bytes + 1 + attributeBytes(member), 3);
  return 1;
}

function stepResult(value: string | Uint8Array | undefined, sealed: string | undefined): StoredResponse {
  if (sealed !== undefined) return { statusCode: 200, headers: {}, sealed };
  const json = typeof value === 'string' ? value : gunzipSync(value ?? new Uint8Array()).toString('utf8');
  return { statusCode: 200, headers: {}, body: JSON.parse(json), bodyEncoding: 'typed' };
}
