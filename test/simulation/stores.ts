import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import {
  ClaimInput,
  CompleteInput,
  DynamoDbIdempotencyRepository,
  FailInput,
  GetInput,
  IdempotencyClock,
  IdempotencyRecord,
  IdempotencyRepository,
  IdempotencyStoreThrottledError,
  InFlightInput,
  InMemoryIdempotencyRepository,
  PutCompletedInput,
  RecordStepInput,
  RemoveInput,
  RenewInput,
  ReviseStepsInput,
  ScanInput,
  StartStepInput,
  StoredResponse,
  TableLayoutOptions,
} from 'nestjs-dynamodb-idempotency';
import { TableLayout } from '../../libs/idempotency/src/dynamodb/table-layout';
import { scopePartition } from '../../libs/idempotency/src/keys/record-key';
import { uniqueTableName } from '../support/dynalite';
import { appItemLikeARecord, createIdempotencyTable } from '../support/table';
import { LandedWrite, WriteOracle, Writer } from './write-oracle';

/** Which final failure a release stores, read from the problem it keeps (none: a plain release). */
function finalKind(response: StoredResponse | undefined): 'poisoned' | 'outcome-unknown' | false {
  if (response === undefined) return false;
  return (response.body as { type?: unknown } | undefined)?.type === 'step-outcome-unknown'
    ? 'outcome-unknown'
    : 'poisoned';
}

/** The fleet's clock-skew margin (`clockSkewSeconds`): what a claim and a sweep must leave past a lease's end. */
export const SKEW_SECONDS = 2;

/** The one true time of the simulation (epoch ms); each instance reads it through its own offset (clock skew). */
export class Time {
  ms = Math.ceil(Date.now() / 1000) * 1000;
}

/** An instance's clock: its wall clock is the true time plus its skew; its monotonic clock, the true time. */
export class InstanceClock extends IdempotencyClock {
  offsetMs = 0;
  constructor(private readonly time: Time) {
    super();
  }
  nowMs(): number {
    return this.time.ms + this.offsetMs;
  }
  monotonicMs(): number {
    return this.time.ms;
  }
}

/** Where the fleet keeps its records, as each instance reaches it, and as the checks read it. */
export interface SimulatedStore {
  /** The layout the instances use (a sort key, and so partitions, or not). */
  layout: TableLayoutOptions;
  /** A repository for one role of an instance (its runs, its sweeps, its operator's commands), with its own clock. */
  repositoryFor(clock: InstanceClock, writer: Writer): InstanceRepository;
  /** A record as stored now (in a sort-key layout, in its scope's partition). */
  read(recordKey: string, scope?: string): Promise<IdempotencyRecord | undefined>;
  /** Deletes the record as read, unless it changed since (the table's TTL deleting an expired item). */
  remove(record: IdempotencyRecord): Promise<unknown>;
  /** What changed in items that are not the module's (undefined: nothing). */
  foreignChanges(): Promise<string | undefined>;
  /**
   * The DynamoDB stores: the record's shard of the index of keys in flight as stored (`in_flight`), or undefined when
   * it has none. Absent on stores without the index.
   */
  inFlightShard?(recordKey: string, scope?: string): Promise<string | undefined>;
  /**
   * The DynamoDB stores: runs once, between a claim's read of a claimable record (its resume form refused) and the
   * restart form it sends on the token it read (another step interleaved). Absent where a claim is one write.
   */
  beforeNextRestart?: () => Promise<void>;
  /** Calls sent to the store that have not answered yet, from every instance. */
  pending: { calls: number };
  /** The oracle on every write the instances' repositories land (invariant 10). */
  oracle: WriteOracle;
}

/** What an instance's repository needs besides the store: its role and clock, and what surrounds each call. */
export interface InstanceRepositorySettings {
  writer: Writer;
  clock: InstanceClock;
  oracle: WriteOracle;
  pending: { calls: number };
  before?: () => void;
  after?: () => void;
}

/**
 * One instance's repository for one role: the store's, with throttling injected into its next claims (only claims: the
 * module retries a throttled completion with real pauses, which would stall the simulation). Every write that lands is
 * handed to the write oracle with who sent it, when, and the instance's clock at the time. `before` runs before each
 * call.
 */
export class InstanceRepository extends IdempotencyRepository {
  throttleNext = 0;
  constructor(
    private readonly inner: IdempotencyRepository,
    private readonly settings: InstanceRepositorySettings,
  ) {
    super();
  }
  private as<T>(
    call: () => Promise<T>,
    landed?: (result: T, sent: number, nowSeconds: number) => LandedWrite | undefined,
  ): Promise<T> {
    const { before, after, pending, oracle, clock } = this.settings;
    const sent = oracle.sent();
    const nowSeconds = clock.nowSeconds();
    before?.();
    let call$: Promise<T>;
    try {
      call$ = call();
    } finally {
      after?.();
    }
    pending.calls += 1;
    const done = () => (pending.calls -= 1);
    const judged = call$.then((result) => {
      const write = landed?.(result, sent, nowSeconds);
      if (write) oracle.landed(write);
      return result;
    });
    judged.then(done, done);
    return judged;
  }
  /** The fields every landed write carries. */
  private write(key: string, sent: number, nowSeconds: number) {
    return { key, sent, nowSeconds, skew: SKEW_SECONDS, writer: this.settings.writer };
  }
  claim = async (input: ClaimInput) => {
    if (this.throttleNext > 0) {
      this.throttleNext -= 1;
      throw new IdempotencyStoreThrottledError('claim', 'ThrottlingException');
    }
    return this.as(
      () => this.inner.claim(input),
      (result, sent, now) =>
        result.claimed
          ? {
              ...this.write(input.key, sent, now),
              kind: 'claim',
              token: result.claimToken,
              fingerprint: input.fingerprint,
              leaseSeconds: input.leaseSeconds,
              resumedSteps: result.steps?.length ?? 0,
              version: input.version,
              onVersionChange: input.onVersionChange,
            }
          : undefined,
    );
  };
  override putCompleted = (input: PutCompletedInput) =>
    this.as(
      () => this.inner.putCompleted(input),
      (result, sent, now) =>
        result.ok
          ? {
              ...this.write(input.key, sent, now),
              kind: 'put-completed',
              token: input.claimToken ?? 'a fresh token',
              fingerprint: input.fingerprint,
              ttlSeconds: input.ttlSeconds,
            }
          : undefined,
    );
  complete = (input: CompleteInput) =>
    this.as(
      () => this.inner.complete(input),
      (result, sent, now) =>
        result.ok
          ? {
              ...this.write(input.key, sent, now),
              kind: 'complete',
              token: input.claimToken,
              ttlSeconds: input.ttlSeconds,
            }
          : undefined,
    );
  fail = async (input: FailInput) => {
    const interleaved = this.beforeNextFail;
    this.beforeNextFail = undefined;
    await interleaved?.();
    return this.failNow(input);
  };
  private failNow = (input: FailInput) =>
    this.as(
      () => this.inner.fail(input),
      (result, sent, now) =>
        result.ok
          ? {
              ...this.write(input.key, sent, now),
              kind: 'fail',
              token: input.claimToken,
              ttlSeconds: input.ttlSeconds,
              // What the write stores, not what the protocol says of it: the problem a final failure keeps.
              final: finalKind(input.response),
            }
          : undefined,
    );
  renew = (input: RenewInput) =>
    this.as(
      () => this.inner.renew(input),
      (result, sent, now) =>
        result.ok
          ? {
              ...this.write(input.key, sent, now),
              kind: 'renew',
              token: input.claimToken,
              leaseSeconds: input.leaseSeconds,
            }
          : undefined,
    );
  override recordStep = (input: RecordStepInput) =>
    this.as(
      () => this.inner.recordStep(input),
      (result, sent, now) =>
        result.ok
          ? { ...this.write(input.key, sent, now), kind: 'step', token: input.claimToken, name: input.step.name }
          : undefined,
    );
  override startStep = (input: StartStepInput) =>
    this.as(
      () => this.inner.startStep(input),
      (result, sent, now) =>
        result.ok
          ? { ...this.write(input.key, sent, now), kind: 'step-start', token: input.claimToken, name: input.step.name }
          : undefined,
    );
  override reviseSteps = (input: ReviseStepsInput) =>
    this.as(
      () => this.inner.reviseSteps(input),
      (result, sent, now) =>
        result.revised
          ? {
              ...this.write(input.key, sent, now),
              kind: 'revise',
              token: input.claimToken,
              status: input.status,
              forget: [...input.forget],
              settled: input.settle?.name,
              ttlSeconds: input.ttlSeconds,
            }
          : undefined,
    );
  get = (input: GetInput) => this.as(() => this.inner.get(input));
  scan = (input: ScanInput) => this.inner.scan(input);
  // The keys in flight as the store reads them: the DynamoDB store's index of them, where a sweep finds stuck leases.
  override inFlight(input: InFlightInput) {
    return this.inner.inFlight(input);
  }
  override inFlightCost() {
    return this.inner.inFlightCost();
  }
  /** Runs once, between a sweep's read of a stuck lease and its release (another step interleaved). */
  beforeNextFail?: () => Promise<void>;
  /** Runs once, between an operator command's read of a record and its removal (another step interleaved). */
  beforeNextRemove?: (input: RemoveInput) => Promise<void>;
  override remove = async (input: RemoveInput) => {
    const interleaved = this.beforeNextRemove;
    this.beforeNextRemove = undefined;
    await interleaved?.(input);
    return this.as(
      () => this.inner.remove(input),
      (result, sent, now) =>
        result.removed
          ? { ...this.write(input.key, sent, now), kind: 'remove', token: input.claimToken, status: input.status }
          : undefined,
    );
  };
  override reopen = (input: Omit<RemoveInput, 'status'>) =>
    this.as(
      () => this.inner.reopen(input),
      (result, sent, now) =>
        result.removed ? { ...this.write(input.key, sent, now), kind: 'reopen', token: input.claimToken } : undefined,
    );
  override supportsCommitWith = async () => false;
}

/** The store's clock: while an instance calls it, that instance's (the store reads it synchronously, first thing). */
class SwitchedClock extends IdempotencyClock {
  current?: IdempotencyClock;
  constructor(private readonly time: Time) {
    super();
  }
  nowMs(): number {
    return this.current?.nowMs() ?? this.time.ms;
  }
}

/**
 * The in-memory store, shared by the fleet: each instance's calls are evaluated with its own clock, as DynamoDB
 * evaluates each request's conditions with the `:now` its client sends.
 */
export function inMemoryStore(time: Time): SimulatedStore {
  const clock = new SwitchedClock(time);
  const store = new InMemoryIdempotencyRepository(clock);
  const pending = { calls: 0 };
  const oracle = new WriteOracle();
  return {
    layout: {},
    pending,
    oracle,
    repositoryFor: (instanceClock, writer) =>
      new InstanceRepository(store, {
        writer,
        clock: instanceClock,
        oracle,
        pending,
        before: () => (clock.current = instanceClock),
        after: () => (clock.current = undefined),
      }),
    read: (key) => store.get({ key }),
    remove: ({ key, claimToken, status }) => store.remove({ key, claimToken, status }),
    foreignChanges: async () => undefined,
  };
}

/**
 * A table on dynalite shared with the app's own items: a single-table layout without a key prefix, and an item of the
 * app's whose attributes are named like the module's (a "PENDING" order, long expired). Each instance has its own
 * DynamoDB repository and clock.
 */
export async function dynaliteStore(client: DynamoDBClient): Promise<SimulatedStore> {
  const layout: TableLayoutOptions = { keySchema: { partitionKey: 'PK', sortKey: 'SK' } };
  const tableName = uniqueTableName('simulation');
  const hooks = restartHooks(client);
  await createIdempotencyTable(client, tableName, layout);
  const foreign = appItemLikeARecord('CUSTOMER#1', 'ORDER#1');
  await client.send(new PutItemCommand({ TableName: tableName, Item: foreign }));
  const reader = new DynamoDbIdempotencyRepository({ client, tableName, ...layout });
  const pending = { calls: 0 };
  const oracle = new WriteOracle();
  const store: SimulatedStore = {
    layout,
    pending,
    oracle,
    repositoryFor: (clock, writer) =>
      new InstanceRepository(new DynamoDbIdempotencyRepository({ client, tableName, clock, ...layout }), {
        writer,
        clock,
        oracle,
        pending,
      }),
    read: (key, scope) => reader.get({ key, partition: scopePartition('', scope) }),
    remove: ({ key, partition, claimToken, status }) => reader.remove({ key, partition, claimToken, status }),
    inFlightShard: async (key, scope) => {
      const { Item } = await client.send(
        new GetItemCommand({
          TableName: tableName,
          Key: new TableLayout(layout).itemKey(key, scopePartition('', scope)),
          ConsistentRead: true,
        }),
      );
      return Item?.in_flight?.S;
    },
    foreignChanges: async () => {
      const { Item } = await client.send(
        new GetItemCommand({ TableName: tableName, Key: { PK: foreign.PK, SK: foreign.SK }, ConsistentRead: true }),
      );
      return JSON.stringify(Item) === JSON.stringify(foreign)
        ? undefined
        : `the app's item is now ${JSON.stringify(Item)}`;
    },
  };
  hooks.set(tableName, store);
  return store;
}

/** The stores of each client, by table: its middleware runs a store's `beforeNextRestart` before its restart form. */
const restartStores = new WeakMap<DynamoDBClient, Map<string, SimulatedStore>>();

function restartHooks(client: DynamoDBClient): Map<string, SimulatedStore> {
  let stores = restartStores.get(client);
  if (stores) return stores;
  const byTable = (stores = new Map<string, SimulatedStore>());
  restartStores.set(client, byTable);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const { TableName, ExpressionAttributeValues } = args.input as {
        TableName?: string;
        ExpressionAttributeValues?: Record<string, unknown>;
      };
      const store = TableName === undefined ? undefined : byTable.get(TableName);
      // The restart form is the only write that carries the token its claim read.
      if (context.commandName === 'UpdateItemCommand' && ExpressionAttributeValues?.[':readToken'] && store) {
        const interleaved = store.beforeNextRestart;
        store.beforeNextRestart = undefined;
        await interleaved?.();
        store.oracle.resent((ExpressionAttributeValues[':token'] as { S: string }).S);
      }
      return next(args);
    },
    { step: 'initialize', name: 'simulationBeforeRestart' },
  );
  return stores;
}
