import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { INestApplicationContext, Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import fc from 'fast-check';
import {
  Idempotent,
  IdempotencyFingerprintFailedError,
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyMismatchError,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotencyResultNotStoredError,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { Dynalite, localClient, uniqueTableName } from '../support/dynalite';
import { Engine, ENGINES, startStore } from '../support/engines';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable } from '../support/table';
import { INPUT_RUNS, INPUT_SEED, jsonMeaning, NotJson } from './inputs';

/**
 * What `@Idempotent()` on a provider method accepts, generated: the values its key function returns (text of any
 * kind, numbers, empty and over-long keys, control characters, objects, nothing) and its arguments, the default
 * fingerprint (any values, JSON or not; a second argument or none). Two application instances on one store call the
 * method in turn; checked on every run: a key or argument the module refuses fails the call before the method runs,
 * the method runs at most once per key, and a second call gets the first one's answer exactly when it is the same call
 * as JSON says it (every argument; one left out is the same as `undefined`), else a mismatch.
 */
const runs = INPUT_RUNS;
const seed = INPUT_SEED;

interface Message {
  key: unknown;
  payload: unknown;
}

/** Every run of the method, by the key it was given. */
const runsByKey = new Map<string, number>();
/** What the method answers when it runs (set before each call: not an argument, which the fingerprint covers). */
let answer: unknown = '';

@Injectable()
class Consumer {
  @Idempotent({ name: 'consumer.handle', key: (message: Message) => message.key as string })
  async handle(message: Message, _extra?: unknown): Promise<unknown> {
    const key = String(message.key);
    runsByKey.set(key, (runsByKey.get(key) ?? 0) + 1);
    return answer;
  }
}

/** A value that refers to itself (an axios-like response): JSON cannot write it. */
function cyclic(): unknown {
  const response: Record<string, unknown> = { id: 'first' };
  response.request = { response };
  return response;
}

/** The key a key function's value stands for, by the documented rule (written apart from the library's code). */
function keyOf(value: unknown): { key?: string; refused?: 'missing' | 'invalid' } {
  if (value === undefined || value === null) return { refused: 'missing' };
  if (typeof value === 'number' && Number.isFinite(value)) return { key: String(value) };
  if (typeof value !== 'string' || value.length === 0) return { refused: 'invalid' };
  // eslint-disable-next-line no-control-regex
  if ([...value].length > 255 || /[\u0000-\u001f\u007f-\u009f]/.test(value)) return { refused: 'invalid' };
  return { key: value };
}

const STORES: ('in-memory' | Engine)[] = ['in-memory', ...ENGINES];

describe.each(STORES)('generated method inputs on the %s store', (store) => {
  let dynamo: Dynalite | undefined;
  let client: DynamoDBClient | undefined;
  const contexts: INestApplicationContext[] = [];
  let run = 0;

  beforeAll(async () => {
    if (store !== 'in-memory') {
      dynamo = await startStore(store);
      client = localClient(dynamo.endpoint);
    }
  });
  afterAll(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
    client?.destroy();
    await dynamo?.stop();
  });

  /** Two instances on one store, the replay cache off: every second call reaches it. */
  async function twoInstances(): Promise<[Consumer, Consumer]> {
    let store: IdempotencyModuleOptions = { repository: new InMemoryIdempotencyRepository() };
    if (client) {
      const tableName = uniqueTableName('methods');
      await createIdempotencyTable(client, tableName);
      store = { client, tableName };
    }
    const instance = async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [IdempotencyModule.forRoot({ ...store, replayCache: { enabled: false } })],
        providers: [Consumer],
      }).compile();
      const context = await moduleRef.init();
      contexts.push(context);
      return context.get(Consumer);
    };
    return [await instance(), await instance()];
  }

  it(`refuses what it cannot key or fingerprint before the method runs, runs it once per key, and answers a second call by what JSON says of it (${runs} runs)`, async () => {
    const [a, b] = await twoInstances();
    // The module logs each refused fingerprint; nothing else may be logged as an error.
    const logs = new CapturedLogs();
    logs.start();
    const keyValue = fc.oneof(
      { weight: 4, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }) },
      { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 250, maxLength: 260 }) },
      { weight: 1, arbitrary: fc.integer() },
      { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, null, '', NaN, Infinity, true, {}, [], ['k']) },
    );
    const payload = fc.anything({ maxDepth: 2, withDate: true, withMap: true, withSet: true, withBigInt: true });
    await fc
      .assert(
        fc.asyncProperty(
          keyValue,
          payload,
          fc.boolean(),
          fc.option(payload, { nil: undefined }),
          fc.option(payload, { nil: undefined }),
          fc.constantFrom('json', 'json', 'function', 'cycle'),
          async (value, first, sameKey, other, extra, resultKind) => {
            // Each run its own keys: a string gets the store's and the run's prefix (a long one stays over the limit), a
            // number the run's range.
            const prefix = `${store}-${++run}-`;
            const ownKey = (raw: unknown) => {
              if (typeof raw === 'string' && raw.length > 0) return prefix + raw;
              if (typeof raw === 'number' && Number.isInteger(raw)) return run * 1e10 + (raw % 1e9);
              return raw;
            };
            const firstKey = ownKey(value);
            const secondKey = sameKey ? firstKey : `${prefix}other`;
            const second = other === undefined ? first : other;
            // The first call without a second argument, the second with `extra` (when there is one).
            const call = (consumer: Consumer, key: unknown, body: unknown, given: unknown, more?: unknown) => {
              answer = given;
              const calling =
                more === undefined
                  ? consumer.handle({ key, payload: body })
                  : consumer.handle({ key, payload: body }, more);
              return calling.then(
                (got) => ({ got }),
                (error: unknown) => ({ error }),
              );
            };
            // The first call's result: JSON, or one that cannot be stored (a function member, a cycle).
            const firstResult: unknown =
              resultKind === 'json' ? 'first' : resultKind === 'function' ? { id: 'first', format: () => 1 } : cyclic();
            const outcomes = [
              await call(a, firstKey, first, firstResult),
              await call(b, secondKey, second, 'second', extra),
            ];
            const meaning = (body: unknown, key: unknown, more?: unknown) => {
              try {
                return jsonMeaning(more === undefined ? [{ key, payload: body }] : [{ key, payload: body }, more]);
              } catch (error) {
                if (error instanceof NotJson) return undefined;
                throw error;
              }
            };
            const expected = [
              { key: keyOf(firstKey), meaning: meaning(first, firstKey) },
              { key: keyOf(secondKey), meaning: meaning(second, secondKey, extra) },
            ];
            let stored: { key: string; meaning: string } | undefined;
            for (const [i, { key, meaning: asJson }] of expected.entries()) {
              const outcome = outcomes[i];
              const error = 'error' in outcome ? outcome.error : undefined;
              if (key.refused === 'missing') expect(error).toBeInstanceOf(IdempotencyKeyMissingError);
              else if (key.refused === 'invalid') expect(error).toBeInstanceOf(IdempotencyKeyInvalidError);
              else if (asJson === undefined) expect(error).toBeInstanceOf(IdempotencyFingerprintFailedError);
              else if (stored === undefined || stored.key !== key.key) {
                // The caller whose call ran gets its own result, whatever could be stored of it.
                expect(outcome).toEqual({ got: i === 0 ? firstResult : 'second' });
                stored = { key: key.key!, meaning: asJson };
              } else if (stored.meaning === asJson) {
                // The same call again: the stored answer, or (documented) that it was done but not kept.
                if (resultKind === 'json') expect(outcome).toEqual({ got: 'first' });
                else expect(error).toBeInstanceOf(IdempotencyResultNotStoredError);
              } else expect(error).toBeInstanceOf(IdempotencyMismatchError);
            }
            for (const key of [firstKey, secondKey]) expect(runsByKey.get(String(key)) ?? 0).toBeLessThanOrEqual(1);
          },
        ),
        { numRuns: runs, seed },
      )
      .finally(() => logs.stop());
    for (const entry of logs.at('error')) {
      expect(entry).toMatchObject({
        msg: expect.stringMatching(/give the method a fingerprint function|capturing the result failed/),
      });
    }
  }, 300_000);
});
