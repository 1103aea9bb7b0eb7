import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import fc from 'fast-check';
import {
  IdempotencyAdmin,
  IdempotencyContext,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyInFlightError,
  IdempotencyMismatchError,
  IdempotencyResultNotStoredError,
  IdempotencyService,
  InMemoryIdempotencyRepository,
  UnrecordableValueError,
} from 'nestjs-dynamodb-idempotency';
import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';
import { Dynalite, localClient, uniqueTableName } from '../support/dynalite';
import { Engine, ENGINES, startStore } from '../support/engines';
import { countCalls } from '../support/call-counter';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';
import { INPUT_RUNS, INPUT_SEED, jsonMeaning, NotJson, TrackedRejection } from './inputs';

/**
 * The inputs a feature accepts, generated (the seams the protocol simulation's fixed handler never reaches): step
 * names from arbitrary strings (prototype names, lone surrogates, long non-Latin text), several steps per run with
 * their results from `fc.anything()` and sizes up to and past the limits, `fingerprint` values of any kind, outcome
 * hooks that throw or reject, and calls of the retrying client inside steps with and without names. Checked on every
 * run: every value the API accepts round-trips (or is refused at the door with a TypeError or RangeError, never by the
 * store), no two different requests share an answer or a downstream key, a rejected hook promise is handled.
 * On the in-memory store, on dynalite and on DynamoDB Local when the suite runs it (DynamoDB's item-size rule and its
 * map keys).
 */
const runs = INPUT_RUNS;
const seed = INPUT_SEED;

/**
 * An invalid Date is itself: Jest's equality calls two `new Date(NaN)` different (NaN is not NaN), though the typed
 * encoding gives back exactly the value recorded (a generated step result holds one now and then).
 */
// (`addEqualityTesters` is Jest's; @types/jest does not declare it.)
(
  expect as unknown as { addEqualityTesters(testers: ((a: unknown, b: unknown) => boolean | undefined)[]): void }
).addEqualityTesters([
  (a: unknown, b: unknown) =>
    a instanceof Date && b instanceof Date && Number.isNaN(a.getTime()) && Number.isNaN(b.getTime()) ? true : undefined,
]);

/** Step names as applications build them from data. */
const stepName = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'charge') },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }) },
  // A name cut from data in the middle of a character: a lone surrogate.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.string({ maxLength: 6 }), fc.integer({ min: 0xd800, max: 0xdfff }))
      .map(([text, unit]) => text + String.fromCharCode(unit)),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 120, maxLength: 255 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 255 }).map((length) => '€'.repeat(length)) },
);
/** A step per line item: many steps with the longest names (ASCII or 3 bytes a character), small results. */
const lineItems = fc
  .tuple(fc.integer({ min: 60, max: 150 }), fc.constantFrom('x', 'x', '€'))
  .map(([count, fill]) => Array.from({ length: count }, (_, i): [string, unknown] => [`${i}-`.padEnd(255, fill), i]));

/** A response's size near the item's limit (kilobytes once gzipped: random text does not compress much further). */
const responseKilobytes = fc.oneof(
  { weight: 1, arbitrary: fc.constant(0) },
  { weight: 3, arbitrary: fc.constantFrom(200, 366, 372, 378, 384, 388, 395) },
);

/** Whether the API takes a step name: 1 to 255 characters of well-formed Unicode, checked apart from its code. */
function acceptedName(name: string): boolean {
  return name.length >= 1 && name.length <= 255 && Buffer.from(name, 'utf8').toString('utf8') === name;
}

/** Step results: any value, and large text now and then (up to and past the limits). */
const stepResult = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.anything({ maxDepth: 2, withDate: true, withMap: true, withSet: true, withBigInt: true }),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 40 }).map((kb) => 'x'.repeat(kb * 1024)) },
);

/** The stores: in memory, and DynamoDB's own rules (item size, map keys) on each engine the suite runs. */
const STORES: ('in-memory' | Engine)[] = ['in-memory', ...ENGINES];

describe.each(STORES)('generated inputs on the %s store', (store) => {
  let dynamo: Dynalite | undefined;
  let client: DynamoDBClient | undefined;
  const contexts: INestApplicationContext[] = [];
  const clients: DynamoDBClient[] = [];
  let keys = 0;
  const newKey = () => `input-${store}-${++keys}`;

  beforeAll(async () => {
    if (store !== 'in-memory') {
      dynamo = await startStore(store);
      client = localClient(dynamo.endpoint);
    }
  });
  afterAll(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
    client?.destroy();
    clients.splice(0).forEach((each) => each.destroy());
    await dynamo?.stop();
  });

  /** A module instance on its own table (replay cache off: every duplicate reaches the store). */
  async function instance(options: IdempotencyModuleOptions = {}) {
    let repository: IdempotencyModuleOptions = { repository: new InMemoryIdempotencyRepository() };
    if (client) {
      const tableName = uniqueTableName('inputs');
      await createIdempotencyTable(client, tableName);
      repository = { client, tableName };
    }
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ ...repository, replayCache: { enabled: false }, ...options })],
    }).compile();
    const context = await moduleRef.init();
    contexts.push(context);
    return { service: context.get(IdempotencyService), admin: context.get(IdempotencyAdmin) };
  }

  it(`every step name and result the API accepts round-trips, sealed or not; others are refused before they run (${runs} runs)`, async () => {
    // Encryption on and off: a sealed step or response is larger as stored, and must round-trip the same.
    const instances = { plain: await instance(), sealed: await instance({ encryption: { keys: [randomBytes(32)] } }) };
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          {
            weight: 3,
            arbitrary: fc.uniqueArray(fc.tuple(stepName, stepResult), {
              minLength: 1,
              maxLength: 24,
              selector: ([name]) => name,
            }),
          },
          { weight: 1, arbitrary: lineItems },
        ),
        responseKilobytes,
        fc.boolean(),
        fc.constantFrom('plain', 'sealed'),
        async (steps, kilobytes, failFirst, sealing: keyof typeof instances) => {
          const { service, admin } = instances[sealing];
          const key = newKey();
          const ran: string[] = [];
          const accepted = new Map<string, unknown>();
          const recorded = new Set<string>();
          let handlerRuns = 0;
          const response = { receipt: randomBytes(kilobytes * 1000).toString('base64') }; // about that much, gzipped
          const run = (fail: boolean) =>
            service.execute({ operation: 'inputs', key }, async (context: IdempotencyContext) => {
              handlerRuns++;
              for (const [name, result] of steps) {
                try {
                  const got = await context.step(name, () => (ran.push(name), result));
                  // A step the first run recorded comes back; one refused then (a size) may be recorded now.
                  if (!fail) expect(got).toStrictEqual(accepted.has(name) ? accepted.get(name) : result);
                  if (fail) accepted.set(name, result);
                  recorded.add(name);
                  // The API's own contract, apart from the code: 1 to 255 characters of well-formed Unicode.
                  expect(acceptedName(name)).toBe(true);
                } catch (error) {
                  // Refused at the door, by its reason: a malformed name (TypeError), a size over the limits
                  // (RangeError). Never the store.
                  if (!(error instanceof RangeError)) expect(error).toBeInstanceOf(TypeError);
                  if (error instanceof TypeError && !(error instanceof UnrecordableValueError)) {
                    expect(acceptedName(name)).toBe(false);
                  }
                  if (!fail) expect(accepted.has(name)).toBe(false);
                }
              }
              if (fail) throw new Error('not final');
              return response;
            });
          // A first run that fails (not final) leaves its steps for the next; else the first run completes itself.
          if (failFirst) await expect(run(true)).rejects.toThrow('not final');
          const firstRun = [...ran];
          expect(await run(false)).toBe(response);
          // Every step recorded by the first run came back without running; only refused ones could run again.
          expect(ran.slice(firstRun.length).filter((name) => accepted.has(name))).toEqual([]);
          const report = await admin.inspect({ name: 'fn inputs', key });
          expect(new Set(report?.steps?.map(({ name }) => name))).toEqual(recorded);
          // Completed, whatever room the steps left the response: never PENDING for a retry to run it again.
          expect(report?.status).toBe('COMPLETED');
          const duplicate = await run(false).then(
            (value) => ({ value }),
            (error: unknown) => ({ error }),
          );
          if ('value' in duplicate) expect(duplicate.value).toEqual(response);
          else expect(duplicate.error).toBeInstanceOf(IdempotencyResultNotStoredError);
          // Sealed when encryption is on and the answer was stored (one stored without its body keeps nothing to seal).
          expect(report?.sealed).toBe(sealing === 'sealed' && 'value' in duplicate);
          expect(handlerRuns).toBe(failFirst ? 2 : 1);
        },
      ),
      { numRuns: runs, seed, endOnFailure: true },
    );
  }, 300_000);

  it(`no two different fingerprint values share an answer (${runs} runs)`, async () => {
    const { service } = await instance();
    const value = fc.anything({ maxDepth: 2, withDate: true, withMap: true, withSet: true, withBoxedValues: false });
    await fc.assert(
      fc.asyncProperty(value, value, async (first, second) => {
        const key = newKey();
        const call = (fingerprint: unknown, answer: string) =>
          service
            .execute({ operation: 'fingerprints', key, fingerprint }, () => answer)
            .then(
              (got) => ({ got }),
              (error: unknown) => ({ error }),
            );
        const a = await call(first, 'first');
        const b = await call(second, 'second');
        const meaningOf = (given: unknown) => {
          try {
            return jsonMeaning(given);
          } catch (error) {
            if (error instanceof NotJson) return undefined;
            throw error;
          }
        };
        const [one, two] = [meaningOf(first), meaningOf(second)];
        // A value JSON cannot tell apart from another is refused (a TypeError); one it can is taken.
        if (one === undefined) expect('error' in a && a.error instanceof TypeError).toBe(true);
        else expect(a).toEqual({ got: 'first' });
        if (two === undefined) expect('error' in b && b.error instanceof TypeError).toBe(true);
        else if (one === undefined) expect(b).toEqual({ got: 'second' });
        // The same request as JSON says it: the first answer; any other: a mismatch, never the first answer.
        else if (one === two) expect(b).toEqual({ got: 'first' });
        else expect('error' in b && b.error instanceof IdempotencyMismatchError).toBe(true);
      }),
      { numRuns: runs, seed },
    );
  }, 300_000);

  it(`gives different requests different downstream keys, one key per call (${runs} runs)`, async () => {
    const { service, admin } = await instance();
    const sent: string[] = [];
    const http = createIdempotentClient({
      fetch: async (_url, init) => {
        sent.push(new Headers(init?.headers).get('idempotency-key') ?? '');
        return new Response('{}', { status: 201, headers: { 'content-type': 'application/json' } });
      },
    });
    /** A step's calls: with a name of their own, or none (then the step's key, for the first only). */
    const calls = fc.array(fc.option(fc.constantFrom('card', 'fee', 'tax'), { nil: undefined }), {
      minLength: 1,
      maxLength: 4,
    });
    await fc.assert(
      fc.asyncProperty(calls, fc.boolean(), async (names, sameRequest) => {
        const key = newKey();
        const keysOf = async (amount: number) => {
          sent.length = 0;
          const refused: unknown[] = [];
          const error = await service
            .execute({ operation: 'downstream', key, fingerprint: { amount } }, async (context) => {
              await context.step('charge', async () => {
                for (const name of names) {
                  await http.request('POST', 'http://provider.invalid/charges', { name }).catch((error: unknown) => {
                    refused.push(error);
                  });
                }
              });
              throw new Error('not final'); // released: the same request under the key runs again
            })
            .catch((thrown: unknown) => thrown);
          return { keys: [...sent], refused, error };
        };
        const first = await keysOf(100);
        if (!sameRequest) {
          // The released record holds the first request's step: another request is refused until an operator's forced
          // release (or the record's expiry) lets it go, and sends nothing meanwhile.
          const refusedRequest = await keysOf(999);
          expect(refusedRequest.error).toBeInstanceOf(IdempotencyMismatchError);
          expect(refusedRequest.keys).toEqual([]);
          expect((await admin.release({ name: 'fn downstream', key }, { force: true })).done).toBe(true);
        }
        const second = await keysOf(sameRequest ? 100 : 999);
        // Within a run: one key per call (a second call without a name is refused before it is sent).
        const unnamed = names.filter((name) => name === undefined).length;
        expect(first.refused).toHaveLength(Math.max(0, unnamed - 1));
        const named = names.filter((name) => name !== undefined);
        for (const run of sameRequest ? [first] : [first, second]) {
          // Each call sent once; one key per name, and the step's own key for its first unnamed call.
          expect(run.keys).toHaveLength(named.length + Math.min(1, unnamed));
          expect(new Set(run.keys).size).toBe(new Set(named).size + Math.min(1, unnamed));
        }
        // A retry of the same request recorded the step: it sends nothing. A different request sends its own keys.
        if (sameRequest) expect(second.keys).toEqual([]);
        else for (const sentKey of second.keys) expect(first.keys).not.toContain(sentKey);
      }),
      { numRuns: runs, seed },
    );
  }, 300_000);

  it(`never starts a step that work left running begins after its call ended (${runs} runs)`, async () => {
    const { service } = await instance();
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 3 }), async (delays) => {
        const started: number[] = [];
        const late: Promise<unknown>[] = [];
        await service.execute({ operation: 'late', key: newKey() }, (context) => {
          for (const [i, delay] of delays.entries()) {
            const wait = new Promise((resolve) => setTimeout(resolve, delay));
            const step = wait.then(() => context.step(`late-${i}`, () => started.push(i)));
            step.catch(() => undefined); // read below, once the call has ended
            late.push(step);
          }
          return 'answered';
        });
        const settled = await Promise.allSettled(late);
        // Whatever started before the call ended may have run; nothing after it.
        for (const [i, outcome] of settled.entries()) {
          if (outcome.status === 'rejected') expect(started).not.toContain(i);
        }
        expect(settled.filter(({ status }) => status === 'rejected').length).toBe(delays.length - started.length);
      }),
      { numRuns: runs, seed },
    );
  }, 300_000);

  it(`outcome hooks that throw or reject never change an answer, and a rejection is always handled (${runs} runs)`, async () => {
    type Behaviour = 'ok' | 'throws' | 'rejects' | 'resolves';
    let behaviour = 'ok' as Behaviour;
    const rejections: TrackedRejection[] = [];
    const { service } = await instance({
      onOutcome: () => {
        if (behaviour === 'throws') throw new Error('the hook threw');
        if (behaviour === 'ok') return;
        const promise = behaviour === 'rejects' ? TrackedRejection.of(new Error('metrics down')) : Promise.resolve();
        if (promise instanceof TrackedRejection) rejections.push(promise);
        return promise as unknown as void;
      },
    });
    const logs = new CapturedLogs();
    logs.start();
    let failed = false;
    await fc
      .assert(
        fc.asyncProperty(
          fc.array(fc.constantFrom<Behaviour>('ok', 'throws', 'rejects', 'resolves'), {
            minLength: 1,
            maxLength: 4,
          }),
          async (behaviours) => {
            const key = newKey();
            let runsOfKey = 0;
            const answers: unknown[] = [];
            for (const each of behaviours) {
              behaviour = each;
              failed ||= each === 'throws' || each === 'rejects';
              answers.push(await service.execute({ operation: 'hooked', key }, () => ({ run: ++runsOfKey })));
            }
            expect(runsOfKey).toBe(1);
            for (const answer of answers) expect(answer).toEqual({ run: 1 });
            await new Promise((resolve) => setImmediate(resolve));
            for (const rejection of rejections.splice(0)) expect(rejection.handled).toBe(true);
          },
        ),
        { numRuns: runs, seed },
      )
      .finally(() => logs.stop());
    // A failing hook is logged (at most once a minute), never silently dropped.
    if (failed) {
      expect(logs.at('error')).toContainEqual(
        expect.objectContaining({ msg: expect.stringContaining('the onOutcome hook failed') }),
      );
    }
  }, 300_000);
  it(`a burst of duplicates of one flight shares one read of the record per turn (${runs} runs)`, async () => {
    // The record's reads, counted where they reach the store.
    let readsSoFar: () => number;
    let store: IdempotencyModuleOptions;
    if (dynamo) {
      const reading = localClient(dynamo.endpoint);
      clients.push(reading);
      const { counts } = countCalls(reading);
      readsSoFar = () => counts.GetItem ?? 0;
      store = { client: reading };
    } else {
      let reads = 0;
      readsSoFar = () => reads;
      store = {
        repository: new (class extends InMemoryIdempotencyRepository {
          override get(...args: Parameters<InMemoryIdempotencyRepository['get']>) {
            reads++;
            return super.get(...args);
          }
        })(),
      };
    }
    const { service } = await instance(store);
    await fc.assert(
      // Duplicates arriving in turns: each turn's fired together (as a burst's requests are parsed), while the first
      // request's handler still runs.
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 4 }), async (turns) => {
        const key = newKey();
        let finish!: () => void;
        let started!: () => void;
        const running = new Promise<void>((resolve) => (started = resolve));
        let handlerRuns = 0;
        const handler = () =>
          new Promise<string>((resolve) => {
            handlerRuns++;
            started();
            finish = () => resolve('the one answer');
          });
        const first = service.execute({ operation: 'burst', key }, handler);
        await running;
        for (const size of turns) {
          const before = readsSoFar();
          const answers = await Promise.allSettled(
            Array.from({ length: size }, () => service.execute({ operation: 'burst', key }, handler)),
          );
          for (const answer of answers) {
            expect(answer.status === 'rejected' && answer.reason instanceof IdempotencyInFlightError).toBe(true);
          }
          // One read for the turn (a release since the last one would be seen), never one per duplicate.
          expect(readsSoFar() - before).toBeLessThanOrEqual(1);
        }
        finish();
        expect(await first).toBe('the one answer');
        expect(await service.execute({ operation: 'burst', key }, handler)).toBe('the one answer');
        expect(handlerRuns).toBe(1);
      }),
      { numRuns: runs, seed },
    );
  }, 300_000);
});

/** A sanity check of the oracle itself: it refuses what JSON cannot tell apart, and reads the rest as JSON does. */
it('reads a value as JSON means it, refusing what JSON would write as something else', () => {
  expect(jsonMeaning({ b: 1, a: [new Date(0), undefined] })).toBe('{"a":["1970-01-01T00:00:00.000Z",null],"b":1}');
  for (const opaque of [new Set([1]), new Map(), NaN, -Infinity, new Date(NaN), () => 1, /x/]) {
    expect(() => jsonMeaning({ v: opaque })).toThrow(NotJson);
  }
  expect(isDeepStrictEqual(JSON.parse(jsonMeaning({ a: 1 })), { a: 1 })).toBe(true);
});
