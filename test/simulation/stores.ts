import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import {
  ClaimInput,
  DynamoDbIdempotencyRepository,
  IdempotencyClock,
  IdempotencyRecord,
  IdempotencyRepository,
  IdempotencyStoreThrottledError,
  InMemoryIdempotencyRepository,
  TableLayoutOptions,
} from 'nestjs-dynamodb-idempotency';
import { scopePartition } from '../../libs/idempotency/src/keys/record-key';
import { uniqueTableName } from '../support/dynalite';
import { appItemLikeARecord, createIdempotencyTable } from '../support/table';

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
  /** An instance's repository, with its own clock. */
  repositoryFor(clock: InstanceClock): InstanceRepository;
  /** A record as stored now (in a sort-key layout, in its scope's partition). */
  read(recordKey: string, scope?: string): Promise<IdempotencyRecord | undefined>;
  /** Deletes the record as read, unless it changed since (the table's TTL deleting an expired item). */
  remove(record: IdempotencyRecord): Promise<unknown>;
  /** What changed in items that are not the module's (undefined: nothing). */
  foreignChanges(): Promise<string | undefined>;
  /** Calls sent to the store that have not answered yet, from every instance. */
  pending: { calls: number };
}

/**
 * One instance's repository: the store's, with throttling injected into its next claims (only claims: the module
 * retries a throttled completion with real pauses, which would stall the simulation). `before` runs before each call.
 */
export class InstanceRepository extends IdempotencyRepository {
  throttleNext = 0;
  constructor(
    private readonly inner: IdempotencyRepository,
    private readonly pending: { calls: number },
    private readonly before: () => void = () => undefined,
    private readonly after: () => void = () => undefined,
  ) {
    super();
  }
  private as<T>(call: () => Promise<T>): Promise<T> {
    this.before();
    let sent: Promise<T>;
    try {
      sent = call();
    } finally {
      this.after();
    }
    this.pending.calls += 1;
    const done = () => (this.pending.calls -= 1);
    sent.then(done, done);
    return sent;
  }
  claim = async (input: ClaimInput) => {
    if (this.throttleNext > 0) {
      this.throttleNext -= 1;
      throw new IdempotencyStoreThrottledError('claim', 'ThrottlingException');
    }
    return this.as(() => this.inner.claim(input));
  };
  override putCompleted = (input: Parameters<IdempotencyRepository['putCompleted']>[0]) =>
    this.as(() => this.inner.putCompleted(input));
  complete = (input: Parameters<IdempotencyRepository['complete']>[0]) => this.as(() => this.inner.complete(input));
  fail = (input: Parameters<IdempotencyRepository['fail']>[0]) => this.as(() => this.inner.fail(input));
  renew = (input: Parameters<IdempotencyRepository['renew']>[0]) => this.as(() => this.inner.renew(input));
  override recordStep = (input: Parameters<IdempotencyRepository['recordStep']>[0]) =>
    this.as(() => this.inner.recordStep(input));
  get = (input: Parameters<IdempotencyRepository['get']>[0]) => this.as(() => this.inner.get(input));
  scan = (input: Parameters<IdempotencyRepository['scan']>[0]) => this.inner.scan(input);
  /** Runs once, between an operator command's read of a record and its removal (another step interleaved). */
  beforeNextRemove?: (input: Parameters<IdempotencyRepository['remove']>[0]) => Promise<void>;
  override remove = async (input: Parameters<IdempotencyRepository['remove']>[0]) => {
    const interleaved = this.beforeNextRemove;
    this.beforeNextRemove = undefined;
    await interleaved?.(input);
    return this.as(() => this.inner.remove(input));
  };
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
  return {
    layout: {},
    pending,
    repositoryFor: (instanceClock) =>
      new InstanceRepository(
        store,
        pending,
        () => (clock.current = instanceClock),
        () => (clock.current = undefined),
      ),
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
  await createIdempotencyTable(client, tableName, layout);
  const foreign = appItemLikeARecord('CUSTOMER#1', 'ORDER#1');
  await client.send(new PutItemCommand({ TableName: tableName, Item: foreign }));
  const reader = new DynamoDbIdempotencyRepository({ client, tableName, ...layout });
  const pending = { calls: 0 };
  return {
    layout,
    pending,
    repositoryFor: (clock) =>
      new InstanceRepository(new DynamoDbIdempotencyRepository({ client, tableName, clock, ...layout }), pending),
    read: (key, scope) => reader.get({ key, partition: scopePartition('', scope) }),
    remove: ({ key, partition, claimToken, status }) => reader.remove({ key, partition, claimToken, status }),
    foreignChanges: async () => {
      const { Item } = await client.send(
        new GetItemCommand({ TableName: tableName, Key: { PK: foreign.PK, SK: foreign.SK }, ConsistentRead: true }),
      );
      return JSON.stringify(Item) === JSON.stringify(foreign)
        ? undefined
        : `the app's item is now ${JSON.stringify(Item)}`;
    },
  };
}
