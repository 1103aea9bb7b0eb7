import { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { gunzipSync, gzipSync } from 'node:zlib';
import { COMPRESS_RESPONSE_ABOVE_BYTES } from '../idempotency.constants';
import { RecordedStep, StoredResponse } from '../repository/idempotency.record';
import { encodedByteLength } from '../response/stored-response.codec';

/**
 * A recorded step as the record's `steps` map keeps it, under its name: its result's typed JSON as `value` (gzipped, B,
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
}

/** A map attribute (a recorded step, the empty map of steps), already in DynamoDB's form. */
export class MapValue {
  constructor(readonly entries: Record<string, AttributeValue>) {}
}

/** A step's entry in the `steps` map. */
export function stepItem({ result, recordedAt, attempt, run }: Omit<RecordedStep, 'bytes' | 'name'>): MapValue {
  const times = { at: { N: String(recordedAt) }, attempt: { N: String(attempt) }, run: { N: String(run) } };
  if (result.sealed !== undefined) return new MapValue({ sealed: { S: result.sealed }, ...times });
  const json = JSON.stringify(result.body);
  const value: AttributeValue =
    Buffer.byteLength(json) > COMPRESS_RESPONSE_ABOVE_BYTES ? { B: gzipSync(json) } : { S: json };
  return new MapValue({ value, ...times });
}

/**
 * The `steps` map as DynamoDB returns it (not unmarshalled: `unmarshall` assigns each map key, and a step named
 * `__proto__` would vanish), in the order they were recorded. Only each step's own attributes, of fixed names, are
 * unmarshalled.
 */
export function recordedSteps(steps: Record<string, AttributeValue>): RecordedStep[] {
  return Object.entries(steps)
    .map(([name, step]) => [name, unmarshall(step.M ?? {}) as StepItem] as const)
    .map(([name, { value, sealed, at, attempt, run }]) => ({
      name,
      result: stepResult(value, sealed),
      recordedAt: Number(at),
      attempt: Number(attempt),
      run: Number(run),
      bytes: sealed !== undefined ? Buffer.byteLength(sealed) : encodedByteLength(value ?? ''),
    }))
    .sort((a, b) => a.run - b.run || a.recordedAt - b.recordedAt);
}

function stepResult(value: string | Uint8Array | undefined, sealed: string | undefined): StoredResponse {
  if (sealed !== undefined) return { statusCode: 200, headers: {}, sealed };
  const json = typeof value === 'string' ? value : gunzipSync(value ?? new Uint8Array()).toString('utf8');
  return { statusCode: 200, headers: {}, body: JSON.parse(json), bodyEncoding: 'typed' };
}
