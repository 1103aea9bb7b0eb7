import { COMPRESS_RESPONSE_ABOVE_BYTES } from '../idempotency.constants';
import { RecordedStep, StoredResponse } from '../repository/idempotency.record';
import fc from 'fast-check';
import { stepEntryBytes } from '../response/step-value';
import { recordedSteps, stepItem } from './step-mapping';

/** A step's entry as DynamoDB hands it back (a map attribute), from the entry written. */
const asRead = (entry: ReturnType<typeof stepItem>) => ({ M: entry.entries });

const typed = (body: unknown): StoredResponse => ({ statusCode: 200, headers: {}, body, bodyEncoding: 'typed' });
const step = (result: StoredResponse, run = 1, recordedAt = 1_800_000_000): Omit<RecordedStep, 'bytes' | 'name'> => ({
  result,
  recordedAt,
  attempt: 1,
  run,
});

describe('step mapping', () => {
  it('keeps a small result as text and compresses one over 0.7 KB, and reads both back with their stored size', () => {
    const small = stepItem(step(typed({ chargeId: 'ch_1' })));
    expect(small.entries.value).toEqual({ S: '{"chargeId":"ch_1"}' });
    const text = 'x'.repeat(COMPRESS_RESPONSE_ABOVE_BYTES);
    const large = stepItem(step(typed({ text })));
    expect(large.entries.value.B).toBeInstanceOf(Uint8Array);
    const [read] = recordedSteps({ large: asRead(large) });
    expect(read.result).toEqual(typed({ text }));
    // As DynamoDB counts it: the name and its element byte, the entry's map, each attribute's name and value.
    const times = 1 + 2 + 10 + (1 + 7 + 1) + (1 + 3 + 1); // at (10 digits), attempt, run
    const valueBytes = (large.entries.value.B as Uint8Array).byteLength;
    expect(valueBytes).toBeLessThan(COMPRESS_RESPONSE_ABOVE_BYTES);
    expect(read.bytes).toBe(5 + 1 + 3 + (1 + 5 + valueBytes) + times);
    expect(recordedSteps({ small: asRead(small) })[0]).toMatchObject({
      bytes: 5 + 1 + 3 + (1 + 5 + 19) + times,
      run: 1,
      attempt: 1,
    });
  });

  it('keeps JSON of exactly 0.7 KB as text', () => {
    const body = 'y'.repeat(COMPRESS_RESPONSE_ABOVE_BYTES - 2); // its JSON, quotes included, takes exactly the limit
    expect(stepItem(step(typed(body))).entries.value).toEqual({ S: JSON.stringify(body) });
  });

  it('keeps a sealed result as its envelope, measured as stored', () => {
    const sealed = stepItem(step({ statusCode: 200, headers: {}, sealed: 'v1.abc.def' }));
    const [read] = recordedSteps({ paid: asRead(sealed) });
    const times = 1 + 2 + 10 + (1 + 7 + 1) + (1 + 3 + 1);
    expect(read).toMatchObject({
      name: 'paid',
      result: { sealed: 'v1.abc.def' },
      bytes: 4 + 1 + 3 + (1 + 6 + 10) + times,
    });
  });

  it('reads the steps in the order they were recorded: by run, then by time', () => {
    const steps = {
      late: asRead(stepItem(step(typed(3), 2, 1_800_000_001))),
      early: asRead(stepItem(step(typed(2), 2, 1_800_000_000))),
      first: asRead(stepItem(step(typed(1), 1, 1_800_000_005))),
    };
    expect(recordedSteps(steps).map(({ name }) => name)).toEqual(['first', 'early', 'late']);
  });

  it('reads a step named __proto__ (or constructor) as any other: a map key is never an assignment', () => {
    // As the SDK hands a map back (parsed JSON): `__proto__` is an own key.
    const written = { p: asRead(stepItem(step(typed('p'), 1, 1))), c: asRead(stepItem(step(typed('c'), 1, 2))) };
    const steps = JSON.parse(JSON.stringify(written).replace('"p":', '"__proto__":').replace('"c":', '"constructor":'));
    expect(recordedSteps(steps).map(({ name, result }) => [name, result.body])).toEqual([
      ['__proto__', 'p'],
      ['constructor', 'c'],
    ]);
  });

  it("never counts a step smaller than DynamoDB does: the journal's count bounds the stored entry's (property)", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 255, unit: 'grapheme' }),
        fc.jsonValue(),
        fc.integer({ min: 1, max: 1_000_000 }),
        (name, body, run) => {
          const result = typed(body);
          const written = stepItem({ result, recordedAt: 9_999_999_999, attempt: run, run });
          const steps = {}; // the name as an own key, whatever it is (`__proto__` included)
          Object.defineProperty(steps, name, { value: asRead(written), enumerable: true });
          const [read] = recordedSteps(steps);
          expect(stepEntryBytes(name, result)).toBeGreaterThanOrEqual(read.bytes!);
        },
      ),
    );
  });
});
