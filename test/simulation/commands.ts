import fc from 'fast-check';
import {
  EffectMode,
  Fleet,
  KEYS,
  LEASE_SECONDS,
  modeOf,
  OPTIMISTIC_KEY,
  recordKeyOf,
  scopeTextOf,
  selectorOf,
  SKEW_SECONDS,
  TTL_SECONDS,
} from './fleet';

const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Lets every promise chain the last step started run as far as it can: until no call to the store is waiting for its
 * answer (dynalite answers over HTTP; the in-memory store in microtasks), four turns in a row: a run's late step and
 * its completion may leave a turn or two between their calls.
 */
async function settle(fleet: Fleet): Promise<void> {
  for (let quiet = 0, tries = 0; quiet < 4 && tries < 2000; tries++) {
    await turn();
    quiet = fleet.store.pending.calls === 0 ? quiet + 1 : 0;
    if (quiet === 0) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await turn();
}

/** A step of the simulation: it acts on the fleet, lets it settle, then checks every invariant. */
abstract class Step implements fc.AsyncCommand<object, Fleet> {
  check(): boolean {
    return true;
  }
  async run(_model: object, fleet: Fleet): Promise<void> {
    await this.act(fleet);
    await settle(fleet);
    await fleet.check();
    if (fleet.violations.length > 0) throw new Error(fleet.violations.join('\n'));
  }
  abstract act(fleet: Fleet): void | Promise<void>;
  abstract toString(): string;
}

/** A client sends a request (its body `variant`; 0 mostly); on the Lambda instance, `early` answers before the run ends. */
export class Send extends Step {
  constructor(
    readonly instance: number,
    readonly key: number,
    readonly variant: number,
    readonly early: boolean,
  ) {
    super();
  }
  act(fleet: Fleet) {
    fleet.send(this.instance, this.key, this.variant, this.early);
  }
  toString() {
    return `send(instance ${this.instance}, key ${this.key}, body ${this.variant}${this.early ? ', answered early' : ''})`;
  }
}

/** A running handler (the `pick`-th that can run: not on a crashed or frozen instance) returns, or fails. */
export class Finish extends Step {
  constructor(
    readonly pick: number,
    readonly outcome: 'ok' | 'fail',
  ) {
    super();
  }
  act(fleet: Fleet) {
    const runnable = runnableRuns(fleet);
    if (runnable.length > 0) runnable[this.pick % runnable.length].finish(this.outcome);
  }
  toString() {
    return `finish(run #${this.pick}, ${this.outcome})`;
  }
}

/** The runs still running on an instance that can run them (not crashed, not frozen), oldest first. */
function runnableRuns(fleet: Fleet) {
  return fleet.executions.filter((run) => run.state === 'running' && !run.instance.crashed && !run.instance.frozen);
}

/** The key's latest running run (on an instance that can run it) returns, or fails. */
export class FinishRunOf extends Step {
  constructor(
    readonly key: number,
    readonly outcome: 'ok' | 'fail',
  ) {
    super();
  }
  act(fleet: Fleet) {
    runnableRuns(fleet)
      .filter(({ key }) => key === this.key)
      .at(-1)
      ?.finish(this.outcome);
  }
  toString() {
    return `finish(the latest run of key ${this.key}, ${this.outcome})`;
  }
}

/** True time moves on (leases end, cached answers age, records expire, Lambda deadlines pass). */
export class Advance extends Step {
  constructor(readonly seconds: number) {
    super();
  }
  act(fleet: Fleet) {
    fleet.advance(this.seconds);
  }
  toString() {
    return `advance(${this.seconds} s)`;
  }
}

/**
 * Two runs of the optimistic key at once, from two instances (the same request, or another with the key): the later
 * one finishes first, then the earlier one, so the second put meets the record the first wrote (an unexpired
 * completed record, whatever it asks for).
 */
export class OptimisticPair extends Step {
  constructor(
    readonly first: number,
    readonly second: number,
    readonly variant: number,
    readonly then: 'ok' | 'fail',
  ) {
    super();
  }
  async act(fleet: Fleet) {
    const key = OPTIMISTIC_KEY;
    fleet.send(this.first, key, 0, false);
    fleet.send(this.second, key, this.variant, false);
    await settle(fleet);
    new FinishRunOf(key, 'ok').act(fleet);
    await settle(fleet);
    new FinishRunOf(key, this.then).act(fleet);
  }
  toString() {
    return `optimistic-pair(instances ${this.first} and ${this.second}, body ${this.variant}, then ${this.then})`;
  }
}

/**
 * A takeover at a lease's edge (the generators' bias toward the moments fencing and skew checks exist for): true time
 * moves to `edgeMs` around the end of the lease of the key's latest running run, and another instance sends the same
 * request (`variant` 0), or another request with the key (1: the claim's restart form, on the DynamoDB store). With
 * `between`, the running owner's heartbeats tick, or its run finishes or fails, between the claim's read of the record
 * and the restart form it sends on the token and status it read. Nothing happens when no run of the key is running, or
 * that moment has passed.
 */
export class Takeover extends Step {
  constructor(
    readonly key: number,
    readonly instance: number,
    readonly edgeMs: number,
    readonly variant = 0,
    readonly between?: 'heartbeats' | 'finish' | 'fail',
  ) {
    super();
  }
  async act(fleet: Fleet) {
    const running = () =>
      [...fleet.executions].reverse().find(({ key, state }) => key === this.key && state === 'running');
    // A race needs a run: one starts on a long-lived process when none of the key is running.
    if (!running() && this.between) {
      fleet.send(this.instance === 0 ? 1 : 0, this.key, 0, false);
      await settle(fleet);
    }
    const run = running();
    if (!run) return;
    const targetMs = run.leaseEndMs + this.edgeMs;
    if (targetMs > fleet.time.ms) fleet.advance((targetMs - fleet.time.ms) / 1000);
    const claimer = run.instance.index === this.instance ? (this.instance + 1) % 3 : this.instance;
    if (this.between) {
      // The owner's writes are sent within a few turns, and land while the claim waits (the one call left in flight).
      const landed = async () => {
        for (let quiet = 0, tries = 0; quiet < 5 && tries < 1000; tries++) {
          await turn();
          quiet = fleet.store.pending.calls > 1 ? 0 : quiet + 1;
        }
      };
      fleet.store.beforeNextRestart = async () => {
        run.instance.heartbeat(); // its lease renewed: the owner holds it again
        await landed();
        if (this.between !== 'heartbeats') {
          run.finish(this.between === 'finish' ? 'ok' : 'fail');
          await landed();
        }
        await fleet.check(); // what the record became (a completion the fleet must know of) before the restart lands
      };
    }
    fleet.send(claimer, this.key, this.variant, false);
  }
  toString() {
    const owner = { heartbeats: 'heartbeats', finish: 'run finishing', fail: 'run failing' };
    const between = this.between ? `, the owner's ${owner[this.between]} before its restart form` : '';
    return `takeover(key ${this.key} by instance ${this.instance}, ${this.edgeMs} ms from the lease's end${this.variant ? ', another request' : ''}${between})`;
  }
}

/**
 * A completed answer seen late, then outlived (the generators' bias toward the replay cache's second bound): 5 s before
 * the key's stored answer expires, `from` asks for it (a cached process keeps it); once it has expired (3.5 s past),
 * `to` runs the key afresh and completes it; then `from` asks again. Each answer is checked when it is given.
 */
export class ExpiryEdge extends Step {
  constructor(
    readonly key: number,
    readonly from: number,
    readonly to: number,
  ) {
    super();
  }
  async act(fleet: Fleet) {
    const record = await fleet.store.read(recordKeyOf(this.key), scopeTextOf(this.key));
    if (record?.status !== 'COMPLETED' || this.from === this.to) return;
    const at = async (ms: number, then: () => void | Promise<void>) => {
      if (ms > fleet.time.ms) fleet.advance((ms - fleet.time.ms) / 1000);
      await then();
      await settle(fleet);
      await fleet.check();
    };
    const expiresMs = record.expiresAt * 1000;
    await at(expiresMs - 5000, () => fleet.send(this.from, this.key, 0, false));
    await at(expiresMs + 3500, () => fleet.send(this.to, this.key, 0, false));
    await at(fleet.time.ms, () => new FinishRunOf(this.key, 'ok').act(fleet));
    await at(fleet.time.ms, () => fleet.send(this.from, this.key, 0, false));
  }
  toString() {
    return `expiry-edge(key ${this.key}: instance ${this.from} reads it late, instance ${this.to} runs it once expired)`;
  }
}

/** An instance's clock drifts, within the skew the module is configured for (offsets of ±1 s: at most 2 s apart). */
export class Skew extends Step {
  constructor(
    readonly instance: number,
    readonly offsetSeconds: number,
  ) {
    super();
  }
  act(fleet: Fleet) {
    fleet.instances[this.instance].clock.offsetMs = this.offsetSeconds * 1000;
  }
  toString() {
    return `skew(instance ${this.instance}, ${this.offsetSeconds} s)`;
  }
}

/** A long-lived process dies mid-run and restarts. */
export class Crash extends Step {
  constructor(readonly instance: number) {
    super();
  }
  act(fleet: Fleet) {
    if (!fleet.instances[this.instance].lambda) fleet.crash(this.instance);
  }
  toString() {
    return `crash(instance ${this.instance})`;
  }
}

/**
 * A crashed owner, in one step: a request for the key on a long-lived process, which dies in the handler (or answers 409
 * to someone else's live run), then time past the lease's end and the skew margin. A few in a row poison a key
 * (`maxCrashedOwners`); with a run failing between them (`Finish`), they must not.
 */
export class CrashedOwner extends Step {
  constructor(
    readonly instance: number,
    readonly key: number,
  ) {
    super();
  }
  async act(fleet: Fleet) {
    fleet.send(this.instance, this.key, 0, false);
    await settle(fleet);
    await fleet.check(); // its answer (a replay, a 409), judged when it was given
    fleet.crash(this.instance);
    fleet.advance(LEASE_SECONDS + SKEW_SECONDS + 1);
  }
  toString() {
    return `crashed owner(instance ${this.instance}, key ${this.key})`;
  }
}

/** A client that kept only the key asks an instance for its outcome (`IdempotencyService.outcome`). */
export class AskOutcome extends Step {
  constructor(
    readonly instance: number,
    readonly key: number,
  ) {
    super();
  }
  async act(fleet: Fleet) {
    await fleet.askOutcome(this.instance, this.key);
  }
  toString() {
    return `ask outcome(instance ${this.instance}, key ${this.key})`;
  }
}

/** The store throttles an instance's next claim. */
export class Throttle extends Step {
  constructor(readonly instance: number) {
    super();
  }
  act(fleet: Fleet) {
    fleet.instances[this.instance].repository.throttleNext += 1;
  }
  toString() {
    return `throttle(instance ${this.instance})`;
  }
}

/**
 * An operator removes a key's record through an instance's `IdempotencyAdmin` (purge, or release with force), now and
 * then with another step (`between`) happening between the command's read of the record and its write.
 */
export class Remove extends Step {
  constructor(
    readonly instance: number,
    readonly key: number,
    readonly how: 'purge' | 'release' | 'release --force',
    readonly between?: Step,
  ) {
    super();
  }
  async act(fleet: Fleet) {
    const instance = fleet.instances[this.instance];
    if (instance.crashed || instance.frozen) return;
    let changed: string | undefined;
    const { between, key } = this;
    if (between) {
      instance.operatorRepository.beforeNextRemove = async (read) => {
        await between.act(fleet);
        await settle(fleet);
        await fleet.check(); // the answers given meanwhile, against the record as it was before the removal
        const now = await fleet.store.read(recordKeyOf(key), scopeTextOf(key));
        if (now?.claimToken !== read.claimToken || now?.status !== read.status) {
          changed = `${read.status} ${read.claimToken} when read, ${now ? `${now.status} ${now.claimToken}` : 'gone'} when removed`;
        }
      };
    }
    const selector = selectorOf(key);
    const result =
      this.how === 'purge'
        ? await instance.admin.purge(selector)
        : await instance.admin.release(selector, { force: this.how === 'release --force' });
    instance.operatorRepository.beforeNextRemove = undefined;
    if (result.done && changed)
      fleet.violate('admin-conditional', `${this.how} of key ${key} removed a record: ${changed}`);
    else if (result.done) fleet.removed(key, instance);
  }
  toString() {
    return `${this.how}(instance ${this.instance}, key ${this.key}${this.between ? `, ${this.between} between its read and its write` : ''})`;
  }
}

/**
 * An operator's step surgery on the key's at-most-once effect (`keys:resolve-step effect --done | --not-done`,
 * `keys:restart --from-step effect`), possibly racing the key's own run: refused for a live lease or a completed record,
 * and conditioned on the record as read (the write oracle judges it). A surgery that is done is a release point.
 */
export class StepSurgery extends Step {
  constructor(
    readonly instance: number,
    readonly key: number,
    readonly how: 'done' | 'not-done' | 'restart',
  ) {
    super();
  }
  async act(fleet: Fleet) {
    const instance = fleet.instances[this.instance];
    if (instance.crashed || instance.frozen) return;
    const surgery =
      this.how === 'restart'
        ? { restartFrom: 'effect' }
        : { resolve: 'effect', resolution: this.how === 'done' ? { done: { by: 0 } } : { notDone: true as const } };
    const result = await instance.admin.reviseSteps(selectorOf(this.key), surgery, { operator: 'simulation' });
    if (result.done) fleet.revised(this.key);
  }
  toString() {
    return `step surgery(instance ${this.instance}, key ${this.key}, ${this.how})`;
  }
}

/** An instance's lease heartbeats tick (a running process renews every third of a lease; a frozen or dead one not). */
export class Heartbeat extends Step {
  constructor(readonly instance: number) {
    super();
  }
  act(fleet: Fleet) {
    const instance = fleet.instances[this.instance];
    if (!instance.crashed && !instance.frozen) instance.heartbeat();
  }
  toString() {
    return `heartbeat(instance ${this.instance})`;
  }
}

/**
 * A late owner (the generators' bias toward every fenced write of an owner): the key's latest running run loses its
 * record, to an operator's release (forced: removed; or kept FAILED with its claim token when it holds steps), to its
 * lease's end (and margin) passing, or to a sweep that marks it FAILED after that; then, with `retake`, another
 * instance runs the same request; and then the first run writes: it finishes (its late step and completion, or its
 * failure) or its heartbeat renews. Each part is checked as it happens; every write must be refused by its fence.
 */
export class LateOwner extends Step {
  constructor(
    readonly key: number,
    readonly how: 'release --force' | 'release' | 'lease-ends' | 'swept',
    readonly retake: boolean,
    readonly then: 'ok' | 'fail' | 'heartbeat',
    /** The long-lived process a run starts on when none of the key is running. */
    readonly owner: 0 | 1 = 0,
  ) {
    super();
  }
  async act(fleet: Fleet) {
    if (modeOf(this.key) !== 'lease') return;
    const at = async (then: () => void | Promise<void>) => {
      await then();
      await settle(fleet);
      await fleet.check();
    };
    const running = () =>
      [...fleet.executions]
        .reverse()
        .find(
          ({ key, state, instance }) =>
            key === this.key && state === 'running' && !instance.crashed && !instance.frozen,
        );
    // No run of the key is running: one starts (on a long-lived process), unless the key is held or done.
    if (!running()) await at(() => fleet.send(this.owner, this.key, 0, false));
    const run = running();
    if (!run) return;
    const other = fleet.instances.find((each) => each !== run.instance && !each.crashed && each.index !== 2)!;
    if (this.how === 'release --force' || this.how === 'release') {
      await at(() => new Remove(other.index, this.key, this.how as 'release').act(fleet));
    } else {
      await at(() => fleet.advance(Math.max(0, (run.leaseEndMs - fleet.time.ms) / 1000) + SKEW_SECONDS + 1.5));
      if (this.how === 'swept') await at(() => new Sweep(other.index).act(fleet));
    }
    if (this.retake) await at(() => fleet.send(other.index, this.key, 0, false));
    if (this.then === 'heartbeat') run.instance.heartbeat();
    else run.finish(this.then);
  }
  toString() {
    return `late-owner(key ${this.key}, owner ${this.owner}: ${this.how}${this.retake ? ', the request run elsewhere' : ''}, then the first run ${this.then})`;
  }
}

/**
 * The reconciler sweeps the store from an instance: stuck PENDING records (lease passed) are marked FAILED. With
 * `heartbeats`, every live instance's heartbeats tick between the sweep's read of a stuck lease and its release: what an
 * eventually consistent read (the index of keys in flight, a scan) shows a sweep, a lease renewed since.
 */
export class Sweep extends Step {
  constructor(
    readonly instance: number,
    readonly heartbeats = false,
  ) {
    super();
  }
  async act(fleet: Fleet) {
    const instance = fleet.instances[this.instance];
    if (instance.crashed || instance.frozen) return;
    if (this.heartbeats) {
      instance.sweepRepository.beforeNextFail = async () => {
        for (const each of fleet.instances) if (!each.crashed && !each.frozen) each.heartbeat();
        await settle(fleet);
        await fleet.check();
      };
    }
    await instance.reconciler.sweep({ maxPagesPerSecond: 1000 });
    instance.sweepRepository.beforeNextFail = undefined;
  }
  toString() {
    return `sweep(instance ${this.instance}${this.heartbeats ? ', heartbeats between its read and its release' : ''})`;
  }
}

/**
 * The table's TTL deletes the records past their `expires_at` (DynamoDB may, any time after): a COMPLETED or FAILED
 * record past its retention, a PENDING one past its lease's end (with the steps a dead owner recorded).
 */
export class TtlDeletes extends Step {
  async act(fleet: Fleet) {
    await fleet.ttlDeletes();
  }
  toString() {
    return 'ttl-deletes';
  }
}

const instance = fc.integer({ min: 0, max: 2 });
const key = fc.integer({ min: 0, max: KEYS - 1 });

/** An operator's removal with another step between its read and its write (`Remove`'s `between`). */
const interleavedRemove = fc
  .tuple(
    instance,
    key,
    fc.constantFrom<'purge' | 'release' | 'release --force'>('purge', 'release', 'release --force'),
    fc.constantFrom('finish', 'fail', 'send', 'lease-ends', 'takeover', 'sweep'),
    instance,
  )
  .map(([i, k, how, kind, other]) => {
    const between =
      kind === 'finish' || kind === 'fail'
        ? new FinishRunOf(k, kind === 'finish' ? 'ok' : 'fail')
        : kind === 'send'
          ? new Send(other, k, 0, false)
          : kind === 'lease-ends'
            ? new Advance(33)
            : kind === 'takeover'
              ? new Takeover(k, other, 2500) // the same status as read, another claim's token
              : new Sweep(other);
    return new Remove(i, k, how, between);
  });

const send = fc
  .tuple(instance, key, fc.oneof({ arbitrary: fc.constant(0), weight: 4 }, fc.constant(1)), fc.boolean())
  .map(([i, k, variant, early]) => new Send(i, k, variant, early));
const finish = fc
  .tuple(fc.nat(5), fc.constantFrom<'ok' | 'fail'>('ok', 'ok', 'fail'))
  .map(([pick, outcome]) => new Finish(pick, outcome));
// Up to and past a lease's end and its clock-skew margin (30 s + 2 s): where takeovers race a late owner.
const advanceToLeaseEnd = fc.constantFrom(28, 29, 30, 31, 32).map((seconds) => new Advance(seconds));
const takeover = fc
  .tuple(fc.constantFrom(0, 1), instance, fc.constantFrom(-2500, -1500, -500, 500, 1500, 2500))
  .map(([k, i, edgeMs]) => new Takeover(k, i, edgeMs));
const sweep = fc.tuple(instance, fc.boolean()).map(([i, heartbeats]) => new Sweep(i, heartbeats));
// Another request takes a lease over past its end: its restart form races the owner's heartbeat, completion or
// failure (which keeps its steps for its own request).
const restartRace = fc
  .tuple(
    fc.constantFrom(0, 1),
    instance,
    fc.constantFrom(2500, 3500),
    fc.constantFrom<'heartbeats' | 'finish' | 'fail'>('heartbeats', 'finish', 'fail'),
  )
  .map(([k, i, edgeMs, between]) => new Takeover(k, i, edgeMs, 1, between));
const heartbeat = instance.map((i) => new Heartbeat(i));
const crashedOwner = fc.tuple(fc.constantFrom(0, 1), fc.constantFrom(0, 1)).map(([i, k]) => new CrashedOwner(i, k));
const optimisticPair = fc
  .tuple(instance, instance, fc.constantFrom(0, 1), fc.constantFrom<'ok' | 'fail'>('ok', 'fail'))
  .filter(([first, second]) => first !== second)
  .map(([first, second, variant, then]) => new OptimisticPair(first, second, variant, then));
const lateOwner = fc
  .tuple(
    fc.constantFrom(0, 1),
    fc.constantFrom<LateOwner['how']>('release --force', 'release', 'lease-ends', 'swept'),
    fc.boolean(),
    fc.constantFrom<'ok' | 'fail' | 'heartbeat'>('ok', 'fail', 'heartbeat'),
  )
  .chain(([k, how, retake, then]) =>
    fc.constantFrom<0 | 1>(0, 1).map((owner) => new LateOwner(k, how, retake, then, owner)),
  );

/** Every step, weighted: mostly requests and runs finishing, then time, faults and operators. */
const surgery = fc
  .tuple(instance, fc.constantFrom(0, 1), fc.constantFrom<StepSurgery['how']>('done', 'not-done', 'restart'))
  .map(([i, k, how]) => new StepSurgery(i, k, how));

export const steps = [
  send,
  fc.tuple(instance, key, fc.constant(0), fc.boolean()).map(([i, k, variant, early]) => new Send(i, k, variant, early)),
  finish,
  fc.tuple(fc.nat(5), fc.constant<'ok'>('ok')).map(([pick, outcome]) => new Finish(pick, outcome)),
  fc.constantFrom(1, 5, 6, 11, 21, 33, 601).map((seconds) => new Advance(seconds)),
  advanceToLeaseEnd,
  fc.tuple(instance, fc.constantFrom(-1, 0, 1)).map(([i, offset]) => new Skew(i, offset)),
  fc.tuple(fc.constantFrom(0, 1), instance, instance).map(([k, from, to]) => new ExpiryEdge(k, from, to)),
  takeover,
  fc.integer({ min: 0, max: 1 }).map((i) => new Crash(i)),
  crashedOwner,
  crashedOwner,
  fc.tuple(instance, key).map(([i, k]) => new AskOutcome(i, k)),
  instance.map((i) => new Throttle(i)),
  fc
    .tuple(
      instance,
      key,
      fc.constantFrom<'purge' | 'release' | 'release --force'>('purge', 'release', 'release --force'),
    )
    .map(([i, k, how]) => new Remove(i, k, how)),
  // The same, with a run finishing, a request, a lease's end, a takeover or a sweep between the command's read and its
  // write (twice as likely: an operator racing the module is where the removal's conditions matter).
  interleavedRemove,
  interleavedRemove,
  sweep,
  fc.constant(new TtlDeletes()),
  heartbeat,
  lateOwner,
  surgery,
];

/**
 * The steps of the dynalite property: the same kinds, weighted toward what reaches a fenced write (late owners,
 * takeovers at a lease's edge, heartbeats, sweeps, operators between a read and a write, two optimistic runs of one
 * key), so that each condition expression of the DynamoDB repository meets a write it must refuse within a few dozen
 * sequences.
 */
export const fencingSteps = [
  send,
  finish,
  advanceToLeaseEnd,
  takeover,
  takeover,
  restartRace,
  restartRace,
  interleavedRemove,
  sweep,
  heartbeat,
  lateOwner,
  lateOwner,
  lateOwner,
  optimisticPair,
  crashedOwner,
  surgery,
];

/**
 * Which instances keep a replay cache (instance 2 is the Lambda container), how far each clock starts off, and how long
 * answers are kept: 600 s mostly, or 8 s (shorter than a cached answer's 10 s, so the cache's two bounds meet).
 */
export const fleetLayouts = fc
  .tuple(
    fc.tuple(fc.boolean(), fc.boolean(), fc.boolean()),
    fc.array(fc.constantFrom(-1, 0, 1), { minLength: 3, maxLength: 3 }),
    fc.constantFrom(TTL_SECONDS, TTL_SECONDS, 8),
    // maxCrashedOwners: off, small caps that takeovers reach, and the default.
    fc.constantFrom(0, 1, 2, 3),
    // The effect step: at least once (half the fleets), or at most once with each kind of probe, or none.
    fc.constantFrom<EffectMode>(
      'at-least-once',
      'at-least-once',
      'at-least-once',
      'at-least-once',
      'at-least-once',
      'no-probe',
      'probe-truth',
      'probe-yes',
      'probe-no',
      'probe-throws',
      'probe-unknown',
    ),
    // A rolling deploy (instance 0 on version 1, the others on 2) now and then, with each onVersionChange.
    fc.constantFrom<'refuse' | 'resume' | 'restart' | undefined>(
      undefined,
      undefined,
      undefined,
      'refuse',
      'resume',
      'restart',
    ),
    // The effect's first attempt in each run fails and is retried within the run, now and then.
    fc.boolean(),
  )
  .map(([cached, offsets, ttlSeconds, maxCrashedOwners, effect, versions, retries]) => ({
    retries,
    cached,
    offsets,
    ttlSeconds,
    maxCrashedOwners,
    effect,
    versions,
  }));
