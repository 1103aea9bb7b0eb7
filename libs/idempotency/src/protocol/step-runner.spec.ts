import { Logger } from '@nestjs/common';
import { MAX_STEP_NAME_LENGTH } from '../idempotency.constants';
import { derivedKeyOf } from '../keys/derived-key';
import { StepInfo, uniqueName } from './step-runner';
import { UnrecordedSteps } from './unrecorded-steps';

describe('uniqueName', () => {
  it('takes a name of 1 to 255 characters once per run', () => {
    const names = new Set<string>();
    uniqueName(names, 'a');
    uniqueName(names, 'b'.repeat(MAX_STEP_NAME_LENGTH));
    expect(() => uniqueName(names, 'a')).toThrow(
      'IdempotencyContext.step("a"): a step of that name already ran in this call; step names are unique within a call.',
    );
  });

  it.each([
    ['an empty name', ''],
    ['a name of 256 characters', 'c'.repeat(MAX_STEP_NAME_LENGTH + 1)],
    ['a name that is not a string', 7 as unknown as string],
  ])('refuses %s', (_what, name) => {
    expect(() => uniqueName(new Set(), name)).toThrow(
      new TypeError('IdempotencyContext.step needs a name of 1 to 255 characters.'),
    );
  });
});

describe('UnrecordedSteps', () => {
  let warnings: { context: unknown; message: unknown }[];
  beforeEach(() => {
    warnings = [];
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(function (this: Logger, message: unknown) {
      warnings.push({ context: (this as unknown as { context: unknown }).context, message });
    });
  });
  afterEach(() => jest.restoreAllMocks());

  it("runs each step with its record's step key and warns once per route that nothing is recorded", async () => {
    const route = `POST /unrecorded-${Date.now()}`;
    const seen: StepInfo[] = [];
    const first = new UnrecordedSteps({ recordKey: 'record-1', fingerprint: 'fp' }, () => route);
    expect(await first.step('charge', (info) => (seen.push(info), 'charged'))).toBe('charged');
    await new UnrecordedSteps({ recordKey: 'record-2', fingerprint: 'fp' }, () => route).step('charge', (info) =>
      seen.push(info),
    );
    expect(seen).toEqual([
      { key: derivedKeyOf({ recordKey: 'record-1', fingerprint: 'fp' }, 'charge'), attempt: 1 },
      { key: derivedKeyOf({ recordKey: 'record-2', fingerprint: 'fp' }, 'charge'), attempt: 1 },
    ]);
    expect(warnings).toEqual([
      {
        context: 'Idempotency',
        message: {
          msg: "steps are not recorded in mode 'optimistic' (there is no claim to record them on): each step runs on every attempt",
          route,
        },
      },
    ]);
    await new UnrecordedSteps({ recordKey: 'record-3', fingerprint: 'fp' }, () => `${route}/other`).step(
      'charge',
      () => undefined,
    );
    expect(warnings).toHaveLength(2);
  });

  it('gives a call without a record key a new random key for each step, and warns nothing', async () => {
    const keys: string[] = [];
    const steps = new UnrecordedSteps();
    await steps.step('one', ({ key }) => keys.push(key));
    await steps.step('two', ({ key }) => keys.push(key));
    expect(keys).toEqual([expect.stringMatching(/^[0-9a-f]{64}$/), expect.stringMatching(/^[0-9a-f]{64}$/)]);
    expect(keys[0]).not.toBe(keys[1]);
    expect(warnings).toEqual([]);
    await expect(steps.step('one', () => undefined)).rejects.toThrow('a step of that name already ran');
  });
});
