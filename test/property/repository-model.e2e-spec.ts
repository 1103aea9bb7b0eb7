import fc from 'fast-check';
import {
  DynamoDbIdempotencyRepository,
  IdempotencyRecord,
  IdempotencyRepository,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { testClock } from '../support/clock';
import { createIdempotencyTable } from '../support/table';

/**
 * Model-based test: random interleavings of claim, complete, fail and clock advances from several workers, checked
 * step by step against a model of what must happen. Invariants: a claim wins only where no live owner exists (at
 * most one owner per key), a completion or failure lands only for the current owner's token, and a COMPLETED
 * record does not change until it expires.
 */
const LEASE = 30;
const TTL = 100;
const FAILED_TTL = 20;
const WORKERS = 3;
const KEYS = 2;

interface ModelRecord {
  status: 'PENDING' | 'COMPLETED' | 'FAILED';
  claimToken: string;
  expiresAt: number;
  body?: string;
}

interface Model {
  records: Map<number, ModelRecord>;
  /** The last token each worker obtained per key. */
  tokens: Map<string, string>;
}

interface Real {
  repository: IdempotencyRepository;
  clock: ManualClock;
  key(index: number): string;
}

const claimable = (record: ModelRecord | undefined, now: number) =>
  !record || record.status === 'FAILED' || record.expiresAt < now;

/** The stored record must be exactly what the model says. */
async function expectMatches(model: Model, real: Real, key: number): Promise<IdempotencyRecord | undefined> {
  const stored = await real.repository.get({ key: real.key(key) });
  const expected = model.records.get(key);
  if (!stored && expected && expected.status !== 'PENDING' && expected.expiresAt < real.clock.nowSeconds()) {
    // A finished record past its expiry may go at any time: DynamoDB's TTL deletes it, the in-memory store evicts it.
    model.records.delete(key);
    return undefined;
  }
  if (!expected) {
    expect(stored).toBeUndefined();
    return stored;
  }
  expect(stored).toMatchObject({
    status: expected.status,
    claimToken: expected.claimToken,
    expiresAt: expected.expiresAt,
  });
  if (expected.body !== undefined) expect(stored?.response?.body).toBe(expected.body);
  return stored;
}

class Claim implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly worker: number,
    readonly key: number,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const now = real.clock.nowSeconds();
    const before = model.records.get(this.key);
    const result = await real.repository.claim({ key: real.key(this.key), fingerprint: 'fp', leaseSeconds: LEASE });
    expect(result.claimed).toBe(claimable(before, now));
    if (result.claimed) {
      model.records.set(this.key, { status: 'PENDING', claimToken: result.claimToken, expiresAt: now + LEASE });
      model.tokens.set(`${this.worker}:${this.key}`, result.claimToken);
    } else {
      expect(result.existing).toMatchObject({ status: before!.status, claimToken: before!.claimToken });
    }
    await expectMatches(model, real, this.key);
  }
  toString = () => `claim(w${this.worker}, k${this.key})`;
}

class Settle implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly worker: number,
    readonly key: number,
    readonly outcome: 'complete' | 'fail',
  ) {}
  check = (model: Readonly<Model>) => model.tokens.has(`${this.worker}:${this.key}`);
  async run(model: Model, real: Real) {
    const now = real.clock.nowSeconds();
    const token = model.tokens.get(`${this.worker}:${this.key}`)!;
    const current = model.records.get(this.key);
    const owner = current?.status === 'PENDING' && current.claimToken === token;
    const body = `w${this.worker}@${now}`;
    const result =
      this.outcome === 'complete'
        ? await real.repository.complete({
            key: real.key(this.key),
            claimToken: token,
            response: { statusCode: 200, headers: {}, body },
            ttlSeconds: TTL,
          })
        : await real.repository.fail({ key: real.key(this.key), claimToken: token, ttlSeconds: FAILED_TTL });
    expect(result.ok).toBe(owner);
    if (owner) {
      model.records.set(
        this.key,
        this.outcome === 'complete'
          ? { status: 'COMPLETED', claimToken: token, expiresAt: now + TTL, body }
          : { status: 'FAILED', claimToken: token, expiresAt: now + FAILED_TTL },
      );
    }
    await expectMatches(model, real, this.key); // a refused write changed nothing, a COMPLETED record included
  }
  toString = () => `${this.outcome}(w${this.worker}, k${this.key})`;
}

class Advance implements fc.AsyncCommand<Model, Real> {
  constructor(readonly seconds: number) {}
  check = () => true;
  async run(_: Model, real: Real) {
    real.clock.advanceSeconds(this.seconds);
  }
  toString = () => `advance(${this.seconds})`;
}

const worker = fc.integer({ min: 0, max: WORKERS - 1 });
const key = fc.integer({ min: 0, max: KEYS - 1 });
const commands = fc.commands(
  [
    fc.tuple(worker, key).map(([w, k]) => new Claim(w, k)),
    fc.tuple(worker, key).map(([w, k]) => new Settle(w, k, 'complete')),
    fc.tuple(worker, key).map(([w, k]) => new Settle(w, k, 'fail')),
    fc.integer({ min: 1, max: 60 }).map((s) => new Advance(s)),
  ],
  { maxCommands: 40, size: 'medium' },
);

async function checkModel(create: (clock: ManualClock) => IdempotencyRepository, numRuns: number) {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(commands, async (cmds) => {
      run += 1;
      const clock = testClock();
      const prefix = `run${run}-${Math.random().toString(36).slice(2)}`;
      const setup = () => ({
        model: { records: new Map(), tokens: new Map() } as Model,
        real: { repository: create(clock), clock, key: (index: number) => `${prefix}#k${index}` } as Real,
      });
      await fc.asyncModelRun(setup, cmds);
    }),
    { numRuns },
  );
}

describe('repository model (fast-check)', () => {
  it('holds for the in-memory repository', async () => {
    await checkModel((clock) => new InMemoryIdempotencyRepository(clock), 300);
  });

  describe('on dynalite', () => {
    let dynamo: Dynalite;
    let tableName: string;
    beforeAll(async () => {
      dynamo = await startDynalite();
      tableName = uniqueTableName();
      await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
    });
    afterAll(() => dynamo.stop());

    it('holds for the DynamoDB repository', async () => {
      const client = localClient(dynamo.endpoint);
      await checkModel((clock) => new DynamoDbIdempotencyRepository({ client, tableName, clock }), 200);
    }, 120_000);
  });
});
