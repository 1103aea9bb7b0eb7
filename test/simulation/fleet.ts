import {
  IdempotencyAdmin,
  IdempotencyContext,
  IdempotencyError,
  IdempotencyInFlightError,
  IdempotencyLeaseLostError,
  IdempotencyReconciler,
  IdempotencyRecord,
  IdempotencyService,
  IdempotencyTelemetry,
  OUTCOME_UNKNOWN,
} from 'nestjs-dynamodb-idempotency';
import type { CallTracking } from '../../libs/idempotency/src/protocol/call-tracking';
import { resolveOptions } from '../../libs/idempotency/src/options/resolved-options';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { TableLayout } from '../../libs/idempotency/src/dynamodb/table-layout';
import { runBefore } from '../../libs/idempotency/src/protocol/invocation-deadline';
import { StoreReadiness } from '../../libs/idempotency/src/startup/store-readiness';
import { DEFAULT_MAX_CRASHED_OWNERS } from '../../libs/idempotency/src/idempotency.constants';
import { INVARIANTS, InvariantId } from './invariants';
import { InstanceClock, InstanceRepository, SimulatedStore, SKEW_SECONDS, Time } from './stores';

/** The fleet's settings: a 30 s lease, a 2 s clock-skew margin, answers kept 600 s (or 8, by layout), cached answers trusted 10 s. */
export const LEASE_SECONDS = 30;
export { SKEW_SECONDS };
export const TTL_SECONDS = 600;
export const MAX_AGE_SECONDS = 10;
/** A Lambda invocation's time limit. */
export const INVOCATION_SECONDS = 20;
/** The keys: 0 and 1 in lease mode, 2 optimistic. */
export const KEYS = 3;
export const OPTIMISTIC_KEY = 2;
export const modeOf = (key: number) => (key === OPTIMISTIC_KEY ? 'optimistic' : 'lease');
/** Key 1's caller has a numeric scope (a user id from an auto-increment key); an operator types it as text. */
export const scopeOf = (key: number) => (key === 1 ? 42 : undefined);
export const scopeTextOf = (key: number) => (key === 1 ? '42' : undefined);
/** Where an operator's command finds the key's record: `--name 'fn simulated' --key key-N [--scope 42]`. */
export const selectorOf = (key: number) => ({ name: 'fn simulated', key: `key-${key}`, scope: scopeTextOf(key) });
export const recordKeyOf = (key: number) => recordKey('fn simulated', scopeTextOf(key), `key-${key}`);

/**
 * How the handler's `effect` step runs: at least once (the default), or at most once with no probe, or with a probe that
 * tells the truth (the effect happened when a run started the function), always says done, always says not done (a
 * probe that lies: the function may then run again, as documented), throws, or cannot tell.
 */
export type EffectMode =
  'at-least-once' | 'no-probe' | 'probe-truth' | 'probe-yes' | 'probe-no' | 'probe-throws' | 'probe-unknown';

/** The provider's transient fault (a 503) that a step's `retry` accepts. */
const TRANSIENT = new Error('a transient fault (the provider answered 503)');

/** A handler's run: which request started it, on which instance, and what became of it. */
export interface Execution {
  id: number;
  key: number;
  instance: Instance;
  /** When the run started: its place in the order of events, and the end of its lease (true time, ms). */
  seq: number;
  /** Moved on by each renewal of its claim that lands. */
  leaseEndMs: number;
  claimToken: string;
  state: 'running' | 'succeeded' | 'failed';
  finish(outcome: 'ok' | 'fail'): void;
}

/** One request: what the client was answered, once it was. */
export interface Request {
  id: number;
  key: number;
  variant: number;
  instance: Instance;
  execution?: Execution;
  answer?: { value: unknown } | { error: unknown };
  checked: boolean;
}

/** A process of the fleet: long-lived, or a Lambda container (frozen between invocations). */
export class Instance {
  readonly clock: InstanceClock;
  /** The repository its runs write through; its sweeps and its operator's commands have their own (the oracle's roles). */
  readonly repository: InstanceRepository;
  readonly operatorRepository: InstanceRepository;
  readonly service: IdempotencyService;
  readonly admin: IdempotencyAdmin;
  readonly reconciler: IdempotencyReconciler;
  /** The repository its sweeps write through. */
  readonly sweepRepository: InstanceRepository;
  frozen = false;
  crashed = false;
  /** A Lambda container's invocation in progress: its deadline (true time, ms). */
  invocationDeadlineMs?: number;

  constructor(
    readonly index: number,
    readonly lambda: boolean,
    readonly cached: boolean,
    fleet: Fleet,
  ) {
    this.clock = new InstanceClock(fleet.time);
    this.repository = fleet.store.repositoryFor(this.clock, 'owner');
    this.operatorRepository = fleet.store.repositoryFor(this.clock, 'operator');
    const options = resolveOptions({
      ...fleet.store.layout,
      pendingTtlSeconds: LEASE_SECONDS,
      clockSkewSeconds: SKEW_SECONDS,
      ttlSeconds: fleet.layout.ttlSeconds ?? TTL_SECONDS,
      maxCrashedOwners: fleet.layout.maxCrashedOwners ?? DEFAULT_MAX_CRASHED_OWNERS,
      replayCache: cached ? { maxEntries: 100, maxAgeSeconds: MAX_AGE_SECONDS } : { enabled: false },
      startupCheck: false,
    });
    // A duplicate's confirmation read is sent on the next turn, not after a real-time gathering delay: every read of a
    // step is answered within the step (the simulation's time is its own).
    options.confirmationGatherMs = 0;
    const tracking = { tracked: false } as CallTracking;
    const telemetry = new IdempotencyTelemetry();
    this.sweepRepository = fleet.store.repositoryFor(this.clock, 'sweep');
    this.reconciler = new IdempotencyReconciler(this.sweepRepository, this.clock, telemetry, options);
    const readiness = new StoreReadiness(this.repository, options);
    this.service = new IdempotencyService(this.repository, this.clock, telemetry, options, readiness, tracking);
    this.admin = new IdempotencyAdmin({
      repository: this.operatorRepository,
      clock: this.clock,
      sortKey: fleet.store.layout.keySchema?.sortKey !== undefined,
      onRemoved: ({ key }) => this.service.forget(key),
    });
  }

  get name(): string {
    return `${this.lambda ? 'lambda' : 'process'} ${this.index}`;
  }

  /**
   * Each lease heartbeat of its running claims ticks now (as its timer would, a third of a lease on): a renewal
   * written through its repository. Read from the service's owner (no public handle: the simulation's own reach).
   */
  heartbeat(): void {
    const owner = (this.service as unknown as { owner: { heartbeats: Set<{ run(): void }> } }).owner;
    for (const heartbeat of owner.heartbeats) heartbeat.run();
  }
}

/** What was stored for a key, and when it stopped being the answer (an operator's removal, or its expiry). */
interface StoredAnswer {
  exec: number;
  expiresAt: number;
  removedMs?: number;
  removedBy?: Instance;
}

/**
 * Several instances of the module over one store, driven step by step by the simulation's commands, and the checks
 * of the invariants (./invariants.ts) after every step. A violation is recorded with the invariant's id and what was
 * seen; the spec fails on the first.
 */
export class Fleet {
  readonly instances: Instance[];
  readonly executions: Execution[] = [];
  readonly requests: Request[] = [];
  readonly violations: string[] = [];
  /** Per key: the answers stored over time, the current one last. */
  private readonly answers = new Map<number, StoredAnswer[]>();
  /**
   * Per key: its release points that removed the record: operators' removals (true time, ms; place in the order of
   * events; by which instance), and the table's TTL deleting a PENDING record past its lease (no instance).
   */
  private readonly removals = new Map<number, { ms: number; seq: number; by?: Instance }[]>();
  private seq = 0;
  /**
   * Per lease-mode key: the step result a run recorded, for which body, and until when its record lasts (its expiry,
   * true time): until then, or a release point, every run of that body must get it.
   */
  private readonly recordedSteps = new Map<string, { by: number; variant: number; seq: number; untilMs: number }>();

  constructor(
    /**
     * Which instances keep a replay cache, (optionally) how far each one's clock starts off true time, in seconds, and
     * how long answers are kept (`ttlSeconds`, default `TTL_SECONDS`).
     */
    readonly layout: {
      cached: boolean[];
      offsets?: number[];
      ttlSeconds?: number;
      maxCrashedOwners?: number;
      effect?: EffectMode;
      /** A rolling deploy: instance 0 runs version 1 of the handler, the others version 2, with this `onVersionChange`. */
      versions?: 'refuse' | 'resume' | 'restart';
      /** The effect's first attempt in each run fails with an error its `retry` accepts: retried within the run. */
      retries?: boolean;
    },
    readonly store: SimulatedStore,
    readonly time: Time,
  ) {
    this.instances = layout.cached.map((cached, index) => new Instance(index, index === 2, cached, this));
    // Clocks that start apart (within the skew), so that an owner behind and a claimer ahead meet often.
    layout.offsets?.forEach((seconds, index) => (this.instances[index].clock.offsetMs = seconds * 1000));
    // A renewal that lands moves its run's lease on: the run holds the key until then (invariant 1).
    store.oracle.maxCrashedOwners = layout.maxCrashedOwners ?? DEFAULT_MAX_CRASHED_OWNERS;
    store.oracle.onLanded = (write) => {
      if (write.kind !== 'renew') return;
      for (const run of this.executions) {
        if (run.claimToken !== write.token) continue;
        run.leaseEndMs = (write.nowSeconds + write.leaseSeconds) * 1000 - run.instance.clock.offsetMs;
      }
    };
  }

  /** Sends a request for `key` (`variant` is its body: 0 and 1 differ) through the instance. */
  send(index: number, key: number, variant: number, early: boolean): void {
    const instance = this.instances[index]; // a crashed process was replaced by a fresh one
    const request: Request = { id: this.requests.length + 1, key, variant, instance, checked: false };
    this.requests.push(request);
    const { versions } = this.layout;
    const version = versions && { version: index === 0 ? '1' : '2', onVersionChange: versions };
    const options = { operation: 'simulated', key: `key-${key}`, scope: scopeOf(key), fingerprint: { variant } };
    const call = () =>
      instance.service.execute({ ...options, mode: modeOf(key), ...version }, (context) => this.run(request, context));
    if (!instance.lambda) {
      this.answered(request, call());
      return;
    }
    // A Lambda container: thawed by the invocation, which ends when its handler's promise resolves, and is then
    // frozen again (an `early` handler answers first, as a timeout interceptor does).
    instance.frozen = false;
    const deadlineMs = this.time.ms + INVOCATION_SECONDS * 1000;
    instance.invocationDeadlineMs = deadlineMs;
    const invocation = runBefore(deadlineMs, () => {
      const answer = call();
      this.answered(request, answer);
      return early ? Promise.resolve('answered early') : answer.catch(() => 'error');
    });
    void invocation.then(() => {
      if (instance.invocationDeadlineMs !== deadlineMs) return; // timed out meanwhile
      instance.invocationDeadlineMs = undefined;
      if (request.answer === undefined) {
        this.violate('invocation-ends-settled', `request ${request.id} on ${instance.name} had not settled`);
      }
      instance.frozen = true;
    });
  }

  /**
   * The handler: a run that records a step, waits for the simulation to finish it (time passes, leases end, other
   * processes take over meanwhile), then records a second step before it returns: a step reached late. Key 1's runs
   * return without the late step, so a late owner's completion itself reaches the store.
   */
  private async run(request: Request, context: IdempotencyContext): Promise<unknown> {
    const { claimToken } = context;
    const { key, instance } = request;
    const startedMs = this.time.ms;
    // A claim that dropped another version's steps (`onVersionChange: 'restart'`): they may run again, as documented.
    if (this.store.oracle.restartedByVersion.has(claimToken)) this.revised(key);
    const record = await this.store.read(recordKeyOf(key), scopeTextOf(key));
    const execution: Execution = {
      id: this.executions.length + 1,
      key,
      instance,
      seq: this.nextSeq(),
      // The lease as written, read back in true time (the instance's clock may be skewed).
      leaseEndMs:
        record && record.claimToken === claimToken
          ? record.expiresAt * 1000 - instance.clock.offsetMs
          : startedMs + LEASE_SECONDS * 1000,
      claimToken,
      state: 'running',
      finish: () => undefined,
    };
    // Right after its claim, a lease-mode run's record is where an operator's command looks for it.
    if (modeOf(key) === 'lease' && record?.claimToken !== claimToken) {
      this.violate(
        'admin-finds-keys',
        `run ${execution.id} of key ${key} has no record where ${JSON.stringify(selectorOf(key))} looks`,
      );
    }
    this.checkExecution(execution);
    if (this.store.oracle.poisonDue.has(claimToken)) {
      this.violate('poison-capped', `run ${execution.id} of key ${key} started after maxCrashedOwners owners crashed`);
    }
    this.executions.push(execution);
    request.execution = execution;
    const finished = new Promise<void>((resolve, reject) => {
      execution.finish = (outcome) => {
        execution.state = outcome === 'ok' ? 'succeeded' : 'failed';
        if (outcome === 'ok') resolve();
        else reject(new Error(`run ${execution.id} failed (a provider's 502)`));
      };
    });
    void finished.catch(() => undefined); // the run may stop at its step (a lease lost)
    const mode = this.layout.effect ?? 'at-least-once';
    // An at-most-once effect of key 0 waits inside its function (a crash there leaves its start without a result).
    const inside = mode !== 'at-least-once' && key === 0;
    const step = async (name: string) => {
      const atMostOnce = name === 'effect' && mode !== 'at-least-once';
      let failedOnce = false;
      const fn = async ({ attempt }: { attempt: number }) => {
        await this.checkStepStart(key, claimToken, execution.id, request.variant, name);
        if (atMostOnce) await this.checkStarted(key, claimToken, execution.id, attempt);
        if (atMostOnce) this.effectRuns.push({ key, exec: execution.id, seq: this.nextSeq() });
        if (retried && !failedOnce) {
          failedOnce = true;
          throw TRANSIENT;
        }
        if (atMostOnce && inside) await finished;
        return { by: execution.id };
      };
      const probe = atMostOnce ? this.probe(mode, key, claimToken) : undefined;
      const retried = name === 'effect' && this.layout.retries === true;
      const retry = retried
        ? { attempts: 2, retryable: (error: unknown) => error === TRANSIENT, backoff: { initialMs: 0 } }
        : undefined;
      const options = { ...(atMostOnce ? { semantics: 'at-most-once' as const, probe } : {}), retry };
      const result = await context.step(name, fn, options);
      await this.checkStepResult(key, claimToken, execution.id, request.variant, result, name);
      return result;
    };
    try {
      const effect = await step('effect');
      if (!inside) await finished;
      const receipt = key === 1 ? undefined : await step('receipt');
      // A run whose effect its probe found done returns without waiting for the simulation: it succeeded.
      if (execution.state === 'running') execution.state = 'succeeded';
      return { exec: execution.id, effect, receipt };
    } catch (error) {
      // A step ended the run (its probe threw, its outcome is unknown, its lease was lost): it holds the key no more.
      if (execution.state === 'running') execution.state = 'failed';
      throw error;
    }
  }

  /** The runs that started the at-most-once effect's function: its effect happened then. */
  private readonly effectRuns: { key: number; exec: number; seq: number }[] = [];

  /**
   * The effect's probe, as the layout says. The truthful one reports a run that started the function since the key's
   * last release point; one that says the effect did not happen tells the write oracle (invariant 13).
   */
  private probe(mode: EffectMode, key: number, claimToken: string) {
    if (mode === 'no-probe') return undefined;
    return async (): Promise<{ by: number } | undefined | typeof OUTCOME_UNKNOWN> => {
      if (mode === 'probe-throws') throw new Error('the provider cannot be asked (a 502)');
      if (mode === 'probe-unknown') return OUTCOME_UNKNOWN;
      const since = this.lastRelease(key);
      const ran = this.effectRuns.filter((run) => run.key === key && run.seq > since).at(-1);
      const done = mode === 'probe-yes' ? { by: 0 } : mode === 'probe-truth' && ran ? { by: ran.exec } : undefined;
      if (done === undefined) this.store.oracle.probedNotDone(claimToken, 'effect');
      return done;
    };
  }

  /**
   * Invariant 13, as an at-most-once step's function starts: its start, of this attempt, is on the record the run owns
   * (the function never runs before its start is recorded).
   */
  private async checkStarted(key: number, claimToken: string, exec: number, attempt: number): Promise<void> {
    const record = await this.store.read(recordKeyOf(key), scopeTextOf(key));
    if (record?.claimToken !== claimToken) return; // taken over meanwhile: the oracle judges its writes
    const started = record.startedSteps?.find((step) => step.name === 'effect');
    if (started?.attempt !== attempt) {
      this.violate(
        'at-most-once',
        `run ${exec} started the effect (attempt ${attempt}) with ${JSON.stringify(started)} recorded`,
      );
    }
  }

  /**
   * Invariant 8, as a step's function starts: the run's own record has no result for the step yet, and no earlier run
   * of the same request recorded one that still counts (no release point since, its record not expired).
   */
  private async checkStepStart(
    key: number,
    claimToken: string,
    exec: number,
    variant: number,
    name: string,
  ): Promise<void> {
    if (modeOf(key) !== 'lease') return;
    const record = await this.store.read(recordKeyOf(key), scopeTextOf(key));
    const recorded = record?.steps?.find((step) => step.name === name);
    if (record?.claimToken === claimToken && recorded) {
      this.violate('steps-resume', `run ${exec} started the step recorded by ${JSON.stringify(recorded.result.body)}`);
    }
    const earlier = this.recordedSteps.get(`${key}:${name}`);
    const counts =
      earlier?.variant === variant &&
      earlier.seq > this.lastRelease(key) &&
      this.time.ms < earlier.untilMs - SKEW_SECONDS * 1000;
    if (record?.claimToken === claimToken && counts) {
      this.violate('steps-resume', `run ${exec} started the step run ${earlier.by} had recorded for the same request`);
    }
    // A step never starts in a run another claim took the key from, unless an operator released it meanwhile.
    const run = this.executions.find((execution) => execution.id === exec);
    if (record && record.claimToken !== claimToken && run && run.seq > this.lastRelease(key)) {
      const successor = this.executions.find(
        (other) => other.key === key && other.id !== exec && other.seq > run.seq && other.state === 'running',
      );
      if (record.status === 'PENDING' && successor) {
        this.violate('one-execution', `run ${exec} started step ${name} while run ${successor.id} held the key`);
      }
    }
  }

  /** Invariant 8, once a step returned: while the run owns the record, the result is the one recorded there. */
  private async checkStepResult(
    key: number,
    claimToken: string,
    exec: number,
    variant: number,
    effect: unknown,
    name: string,
  ): Promise<void> {
    if (modeOf(key) !== 'lease') return;
    const record = await this.store.read(recordKeyOf(key), scopeTextOf(key));
    if (record?.claimToken !== claimToken || record.status !== 'PENDING') return;
    const recorded = record.steps?.find((step) => step.name === name)?.result.body;
    if (JSON.stringify(recorded) !== JSON.stringify(effect)) {
      this.violate(
        'steps-resume',
        `run ${exec} got ${JSON.stringify(effect)}, the record has ${JSON.stringify(recorded)}`,
      );
    }
    const { by } = effect as { by: number };
    if (by === exec) {
      this.recordedSteps.set(`${key}:${name}`, { by, variant, seq: this.nextSeq(), untilMs: record.expiresAt * 1000 });
    }
  }

  private answered(request: Request, answer: Promise<unknown>): void {
    answer.then(
      (value) => (request.answer = { value }),
      (error: unknown) => (request.answer = { error }),
    );
  }

  /** Invariant 1, when a run starts: no other run of the key may still own it, and none may have completed it. */
  private checkExecution(execution: Execution): void {
    if (modeOf(execution.key) !== 'lease') return;
    const now = this.time.ms;
    const lastRelease = this.lastRelease(execution.key);
    for (const other of this.executions) {
      if (other.key !== execution.key || other.seq < lastRelease) continue;
      if (other.state === 'running' && other.leaseEndMs > now) {
        this.violate('one-execution', `run ${execution.id} started while run ${other.id} still held the lease`);
      }
      // Expired by every clock of the fleet (within the skew): then a new first run is due.
      const stored = this.currentAnswer(execution.key);
      if (other.state === 'succeeded' && stored?.exec === other.id && this.unexpired(stored)) {
        this.violate('one-execution', `run ${execution.id} started after run ${other.id} completed the key`);
      }
    }
  }

  private currentAnswer(key: number): StoredAnswer | undefined {
    const answers = this.answers.get(key) ?? [];
    const last = answers.at(-1);
    return last && last.removedMs === undefined ? last : undefined;
  }

  /** Notes an operator's removal of the key's record (through an instance's `IdempotencyAdmin`). */
  removed(key: number, by: Instance): void {
    const removals = this.removals.get(key) ?? [];
    removals.push({ ms: this.time.ms, seq: this.nextSeq(), by });
    this.removals.set(key, removals);
    const current = this.currentAnswer(key);
    if (current) Object.assign(current, { removedMs: this.time.ms, removedBy: by });
  }

  /** Notes an operator's step surgery on the key (a release point: the steps it forgot may run again). */
  revised(key: number): void {
    const removals = this.removals.get(key) ?? [];
    removals.push({ ms: this.time.ms, seq: this.nextSeq() });
    this.removals.set(key, removals);
  }

  /**
   * The table's TTL: every record whose `expires_at` has passed by the true time is deleted (if unchanged since read),
   * a PENDING one as soon as its lease's end has passed, whatever its owner's clock says.
   */
  async ttlDeletes(): Promise<void> {
    for (let key = 0; key < KEYS; key++) {
      const record = await this.store.read(recordKeyOf(key), scopeTextOf(key));
      if (!record || record.expiresAt * 1000 >= this.time.ms) continue;
      await this.store.remove(record);
      // A PENDING record's expiry is a release point (invariant 1), by DynamoDB's clock, without the skew margin.
      if (record.status === 'PENDING') {
        const removals = this.removals.get(key) ?? [];
        removals.push({ ms: this.time.ms, seq: this.nextSeq() });
        this.removals.set(key, removals);
      }
    }
  }

  /** Moves true time; a Lambda invocation past its deadline is timed out (its container frozen). */
  advance(seconds: number): void {
    this.time.ms += seconds * 1000;
    for (const instance of this.instances) {
      if (instance.invocationDeadlineMs !== undefined && instance.invocationDeadlineMs <= this.time.ms) {
        instance.invocationDeadlineMs = undefined;
        instance.frozen = true;
      }
    }
  }

  /**
   * A client asks an instance for a key's outcome by its key alone (`IdempotencyService.outcome`): a completed one is
   * the stored answer (invariant 2), one in flight is held by a PENDING record (invariant 5).
   */
  async askOutcome(index: number, key: number): Promise<void> {
    const instance = this.instances[index];
    if (instance.crashed || instance.frozen) return;
    let outcome: Awaited<ReturnType<IdempotencyService['outcome']>>;
    try {
      outcome = await instance.service.outcome({ operation: 'simulated', key: `key-${key}`, scope: scopeOf(key) });
    } catch (error) {
      if (error instanceof IdempotencyError) return; // a documented problem (a stored answer that cannot be replayed)
      throw error;
    }
    const record = await this.store.read(recordKeyOf(key), scopeTextOf(key));
    const stored =
      record?.status === 'COMPLETED' ? (record.response?.body as { exec?: number } | undefined) : undefined;
    if (outcome.state === 'completed') {
      const exec = (outcome.value as { exec?: number } | undefined)?.exec;
      if (stored?.exec !== exec) {
        this.violate(
          'one-answer',
          `the outcome of key ${key} by its key was run ${exec}, the stored answer ${stored?.exec}`,
        );
      }
    }
    if (outcome.state === 'in-flight' && record?.status !== 'PENDING') {
      this.violate(
        'in-flight-held',
        `the outcome of key ${key} by its key was in flight, its record ${record?.status}`,
      );
    }
  }

  /** A process dies: its runs never finish, its leases are not renewed. It restarts with an empty cache. */
  crash(index: number): void {
    const instance = this.instances[index];
    instance.crashed = true;
    instance.service.onApplicationShutdown();
    this.instances[index] = new Instance(index, instance.lambda, instance.cached, this);
  }

  /** After each step: what is stored now, then every answer given since the last step (invariant 2 and the 409 rule). */
  async check(): Promise<void> {
    const records = new Map<number, IdempotencyRecord | undefined>();
    for (let key = 0; key < KEYS; key++) records.set(key, await this.store.read(recordKeyOf(key), scopeTextOf(key)));
    // Invariant 10: every write that landed since the last step, judged as it landed; then the records as they are.
    for (const fault of this.store.oracle.violations.splice(0)) this.violate('writes-fenced', fault);
    for (const fault of this.store.oracle.poisonViolations.splice(0)) this.violate('poison-capped', fault);
    for (const fault of this.store.oracle.atMostOnceViolations.splice(0)) this.violate('at-most-once', fault);
    for (const [key, record] of records) this.store.oracle.sync(recordKeyOf(key), record);
    // Invariant 11, on the DynamoDB store: the index of keys in flight holds exactly the PENDING records.
    for (const [key, record] of records) {
      const shard = await this.store.inFlightShard?.(recordKeyOf(key), scopeTextOf(key));
      if (shard === undefined && !this.store.inFlightShard) continue;
      const expected =
        record?.status === 'PENDING' ? new TableLayout(this.store.layout).inFlightShard(record.key) : undefined;
      if (shard !== expected) {
        this.violate(
          'in-flight-indexed',
          `key ${key} is ${record?.status ?? 'absent'} and its shard is ${shard ?? 'none'}`,
        );
      }
    }
    const foreign = await this.store.foreignChanges();
    if (foreign) this.violate('own-items-only', foreign);
    for (let key = 0; key < KEYS; key++) this.readStored(key, records.get(key));
    for (const request of this.requests) {
      if (request.answer === undefined || request.checked) continue;
      request.checked = true;
      this.checkAnswer(request, records.get(request.key));
    }
  }

  private readStored(key: number, record: IdempotencyRecord | undefined): void {
    // A recorded step lasts as long as its record: its expiry moves with each lease renewal and release.
    for (const name of ['effect', 'receipt']) {
      const step = this.recordedSteps.get(`${key}:${name}`);
      const kept = record?.steps?.some(
        (recorded) =>
          recorded.name === name && JSON.stringify(recorded.result.body) === JSON.stringify({ by: step?.by }),
      );
      if (step && kept) step.untilMs = record!.expiresAt * 1000;
      if (record?.status === 'COMPLETED') this.recordedSteps.delete(`${key}:${name}`); // a new life only after it expires
    }
    const answers = this.answers.get(key) ?? [];
    this.answers.set(key, answers);
    const current = this.currentAnswer(key);
    const body = record?.status === 'COMPLETED' ? (record.response?.body as { exec?: number } | undefined) : undefined;
    if (body?.exec === undefined) return;
    if (current?.exec === body.exec) return;
    answers.push({ exec: body.exec, expiresAt: record!.expiresAt });
  }

  /** Invariant 2: once a key completed, every answer for it is the stored one, or a documented error. */
  private checkAnswer(request: Request, record: IdempotencyRecord | undefined): void {
    const { key, answer } = request;
    const now = this.time.ms;
    if (answer === undefined) return;
    if ('error' in answer) {
      // A run told its lease is lost (a step found it passed) answers 409 lease-lost: not an in-flight answer.
      if (answer.error instanceof IdempotencyInFlightError && !(answer.error instanceof IdempotencyLeaseLostError)) {
        if (record?.status !== 'PENDING' && !this.holder(key)) {
          this.violate('in-flight-held', `request ${request.id} was answered in flight, but no run holds the key`);
        }
        return;
      }
      if (answer.error instanceof IdempotencyError) return;
      // The run's own error: in optimistic mode, never when the same request had already completed.
      const stored = this.currentAnswer(key);
      if (
        modeOf(key) === 'optimistic' &&
        stored &&
        this.unexpired(stored) &&
        this.sameRequest(key, stored.exec, request.variant)
      ) {
        this.violate('one-answer', `request ${request.id} got its run's error, but run ${stored.exec} completed it`);
      }
      return;
    }
    const exec = (answer.value as { exec: number }).exec;
    if (request.execution?.id === exec) return; // the caller that ran it gets its own result
    const answers = this.answers.get(key) ?? [];
    const stored = answers.find((candidate) => candidate.exec === exec);
    if (stored === undefined) {
      this.violate('one-answer', `request ${request.id} was answered with run ${exec}, which was never stored`);
      return;
    }
    if (stored === this.currentAnswer(key)) return;
    if (stored.removedMs !== undefined) {
      const withinBound = now < stored.removedMs + MAX_AGE_SECONDS * 1000 && stored.removedBy !== request.instance;
      if (!withinBound) {
        this.violate(
          'purge-honoured',
          `request ${request.id} on ${request.instance.name} replayed run ${exec} ${(now - stored.removedMs) / 1000} s after it was removed`,
        );
      }
      return;
    }
    if (now > (stored.expiresAt + 1 + SKEW_SECONDS) * 1000) {
      this.violate('one-answer', `request ${request.id} replayed run ${exec}, which is not the stored answer`);
    }
  }

  /** Whether a stored answer is unexpired by every clock of the fleet (they are at most the skew apart). */
  private unexpired(stored: StoredAnswer): boolean {
    return stored.expiresAt * 1000 >= this.time.ms + SKEW_SECONDS * 1000;
  }

  /** Whether a run that started under a claim of the key is still running within its lease. */
  private holder(key: number): boolean {
    const released = this.lastRelease(key);
    return this.executions.some(
      (run) =>
        run.key === key &&
        run.state === 'running' &&
        !run.instance.crashed &&
        run.seq > released &&
        run.leaseEndMs > this.time.ms,
    );
  }

  /** When an operator last removed the key's record (its place in the order of events), or 0. */
  private lastRelease(key: number): number {
    return Math.max(0, ...(this.removals.get(key) ?? []).map((removal) => removal.seq));
  }

  private nextSeq(): number {
    return ++this.seq;
  }

  /** Whether the stored run answered a request with this body. */
  private sameRequest(key: number, exec: number, variant: number): boolean {
    return this.requests.some(
      (request) => request.key === key && request.execution?.id === exec && request.variant === variant,
    );
  }

  violate(id: InvariantId, detail: string): void {
    this.violations.push(`${INVARIANTS[id]} — violated: ${detail}`);
  }

  /** Stops every instance's timers. */
  stop(): void {
    for (const instance of this.instances) instance.service.onApplicationShutdown();
  }
}
