import { IdempotencyRecord, IdempotencyStatus } from 'nestjs-dynamodb-idempotency';

/** Who sends a write: the key's owner (a run), the reconciler's sweep, an operator's command. */
export type Writer = 'owner' | 'sweep' | 'operator';

/** A write that landed, as the oracle judges it: what it did, who sent it, when, and by whose clock. */
export type LandedWrite = { key: string; sent: number; nowSeconds: number; skew: number; writer: Writer } & (
  | {
      kind: 'claim';
      token: string;
      fingerprint: string;
      leaseSeconds: number;
      resumedSteps: number;
      /** What the claim asked (its input, not what the store did): its version and `onVersionChange`. */
      version?: string;
      onVersionChange?: 'refuse' | 'resume' | 'restart';
    }
  | { kind: 'put-completed'; token: string; fingerprint: string; ttlSeconds: number }
  | { kind: 'complete'; token: string; ttlSeconds: number }
  | { kind: 'fail'; token: string; ttlSeconds: number; final: 'poisoned' | 'outcome-unknown' | false }
  | { kind: 'reopen'; token: string }
  | { kind: 'renew'; token: string; leaseSeconds: number }
  | { kind: 'step'; token: string; name: string }
  | { kind: 'step-start'; token: string; name: string }
  | { kind: 'remove'; token: string; status: IdempotencyStatus }
  | {
      kind: 'revise';
      token: string;
      status: IdempotencyStatus;
      forget: string[];
      settled?: string;
      ttlSeconds: number;
    }
);

/** What the oracle knows of a record: its state, and when (in the order of calls) it came to be. */
interface Known {
  status: IdempotencyStatus;
  token: string;
  expiresAt: number;
  fingerprint: string;
  steps: boolean;
  /** A final failure (a poisoned key, a step's unknown outcome): claimable only once expired. */
  final: boolean;
  /** The at-most-once steps started and not recorded, by the claim token that started each. */
  started: Map<string, string>;
  /** The version of the handler whose claim wrote it (kept by a claim without one). */
  version?: string;
  at: number;
}

/**
 * The oracle on the store's writes (invariant 10): every write that lands on a record is checked against the record as
 * it stood, whoever sent it and whatever the answers say. A completion, failure, renewal or step lands only for the
 * claim that owns the PENDING record; a claim only over a record a claim may take (a lease past its end by the skew
 * margin, a finished record past its expiry, a failed one; one that holds steps only for its own request; steps handed
 * back only to the same request); a sweep only on a lease past its end and margin; an operator only on the record as
 * read.
 *
 * Writes are judged in the order they are answered. A write is judged only when the record's state it meets came to be
 * before the write was sent: two writes in flight at once on one record cannot be ordered from outside, and are not
 * judged against each other (the store's fences are what orders them). Between the simulation's steps nothing is in
 * flight, and the oracle takes the records as the store has them (`sync`).
 */
export class WriteOracle {
  private readonly known = new Map<string, Known | undefined>();
  private order = 0;
  readonly violations: string[] = [];
  /** Per record: the expiry the write that finished it asked for (a completion, a failure, optimistic mode's put). */
  private readonly retention = new Map<string, { token: string; status: IdempotencyStatus; expiresAt: number }>();
  /** Per claim token: when its restart form was sent. */
  private readonly resentAt = new Map<string, number>();
  /** Told of every write that lands (the fleet follows renewals). */
  onLanded?: (write: LandedWrite) => void;
  /** The fleet's `maxCrashedOwners` (0: off). */
  maxCrashedOwners = 0;
  /**
   * Per record: the claims since its last clean end (a completion, an owner's own release, its removal), in order; each
   * but the last, once another claims, crashed on it (it never ended cleanly).
   */
  private readonly owners = new Map<string, string[]>();
  /** The claims that took a lease over after `maxCrashedOwners` owners in a row crashed: they must poison the key. */
  readonly poisonDue = new Set<string>();
  /** Poisonings by a claim that was not due to poison (invariant 12). */
  readonly poisonViolations: string[] = [];
  /**
   * At-most-once steps a claim may start again over their start (invariant 13), as `token name`: its probe said the
   * effect did not happen (the fleet's probe says so here).
   */
  private readonly notDone = new Set<string>();
  /** Starts of at-most-once steps over a start no probe or operator cleared, and unknown outcomes without a start. */
  readonly atMostOnceViolations: string[] = [];

  /** The claims that took a record over from another version without its steps (`onVersionChange: 'restart'`). */
  readonly restartedByVersion = new Set<string>();

  /** A probe of `token`'s run said the step's interrupted attempt had no effect: the run may start it again. */
  probedNotDone(token: string, name: string): void {
    this.notDone.add(`${token} ${name}`);
  }

  /** A call is being sent: its place in the order of events. */
  sent(): number {
    return ++this.order;
  }

  /**
   * A claim's second request is being sent (the restart form, after its resume form lost): its write is judged from
   * here, against what the record became while the claim read it.
   */
  resent(token: string): void {
    this.resentAt.set(token, this.sent());
  }

  /** The record as the store has it now (nothing in flight). */
  sync(key: string, record: IdempotencyRecord | undefined): void {
    const known = this.known.get(key);
    // A finished record lasts as long as the write that finished it asked (its time plus the retention); no later write
    // can land on it but a claim (another token) or a removal.
    const asked = this.retention.get(key);
    if (record && asked?.token === record.claimToken && asked.status === record.status) {
      if (record.expiresAt !== asked.expiresAt) {
        this.violations.push(
          `${asked.status} ${asked.token} expires at ${record.expiresAt}, where the write that finished it asked for ${asked.expiresAt}`,
        );
      }
    }
    this.retention.delete(key);
    if (!record) this.owners.delete(key); // removed, or deleted by the table's TTL: the count starts again
    this.known.set(
      key,
      record && {
        status: record.status,
        token: record.claimToken,
        expiresAt: record.expiresAt,
        fingerprint: record.fingerprint,
        steps: (record.steps?.length ?? 0) + (record.startedSteps?.length ?? 0) > 0,
        final: record.status === 'FAILED' && record.response !== undefined,
        // The store does not keep who started a step: the starter known from its write, else another run's.
        started: new Map(
          (record.startedSteps ?? []).map((step) => [step.name, known?.started.get(step.name) ?? 'a run before']),
        ),
        version: record.version,
        at: ++this.order,
      },
    );
  }

  /** A write landed: judged against the record it met (when that is known), then applied. */
  landed(write: LandedWrite): void {
    const before = this.known.get(write.key);
    const sent = write.kind === 'claim' ? Math.max(write.sent, this.resentAt.get(write.token) ?? 0) : write.sent;
    const judged = !this.known.has(write.key) || before === undefined || before.at < sent;
    const fault = judged ? this.fault(write, before) : undefined;
    if (fault)
      this.violations.push(`${write.writer} ${write.kind} by ${write.token} landed on ${describe(before)}: ${fault}`);
    this.countOwners(write, before);
    if (judged) this.checkAtMostOnce(write, before);
    this.known.set(write.key, this.after(write, before));
    if (write.kind === 'complete' || write.kind === 'fail' || write.kind === 'put-completed') {
      const status = write.kind === 'fail' ? 'FAILED' : 'COMPLETED';
      this.retention.set(write.key, { token: write.token, status, expiresAt: write.nowSeconds + write.ttlSeconds });
    }
    this.onLanded?.(write);
  }

  /**
   * Invariant 12's bookkeeping, from the writes alone: a claim that takes a lease over (of the same request) after
   * `maxCrashedOwners` owners in a row crashed is due to poison the key; a poisoning by any other claim is a violation.
   * A clean end (a completion, an owner's own release) or a removal starts the count again; a sweep's or an operator's
   * release does not (it lets one more owner try).
   */
  private countOwners(write: LandedWrite, before: Known | undefined): void {
    const { key } = write;
    switch (write.kind) {
      case 'claim': {
        // A restart by version drops the record's steps and starts its owners afresh, as every restart form does.
        const restarts = otherVersion(write, before) === 'restart';
        const same = before && before.status !== 'COMPLETED' && before.fingerprint === write.fingerprint && !restarts;
        const previous = same ? (this.owners.get(key) ?? []) : [];
        const cap = this.maxCrashedOwners;
        if (before?.status === 'PENDING' && same && cap > 0 && previous.length >= cap) this.poisonDue.add(write.token);
        this.owners.set(key, [...previous, write.token]);
        return;
      }
      case 'fail':
        if (write.final === 'poisoned' && !this.poisonDue.has(write.token)) {
          const crashed = (this.owners.get(key) ?? []).length - 1;
          this.poisonViolations.push(
            `claim ${write.token} poisoned the key after ${crashed} crashed owner(s) (maxCrashedOwners ${this.maxCrashedOwners})`,
          );
        }
        // An owner's own release is a clean end, whatever the protocol told the store (a sweep's or an operator's is not).
        if (write.writer === 'owner' && write.final !== 'poisoned') this.owners.delete(key);
        return;
      case 'complete':
      case 'put-completed':
      case 'remove':
        this.owners.delete(key);
        return;
      default:
        return;
    }
  }

  /**
   * Invariant 13, from the writes alone: an at-most-once step's start lands over an earlier start of it (which no result
   * replaced and no operator forgot) only from the run that made that start (its retry within the run) or from a run
   * whose probe said the effect did not happen; a step's unknown outcome is stored only over a start.
   */
  private checkAtMostOnce(write: LandedWrite, before: Known | undefined): void {
    if (write.kind === 'step-start') {
      const starter = before?.started.get(write.name);
      if (starter !== undefined && starter !== write.token && !this.notDone.has(`${write.token} ${write.name}`)) {
        this.atMostOnceViolations.push(
          `claim ${write.token} started step ${write.name} again over a start no probe or operator cleared`,
        );
      }
    }
    if (write.kind === 'fail' && write.final === 'outcome-unknown' && (before?.started.size ?? 0) === 0) {
      this.atMostOnceViolations.push(
        `claim ${write.token} stored an unknown step outcome on a record with no started step`,
      );
    }
  }

  private fault(write: LandedWrite, before: Known | undefined): string | undefined {
    const now = write.nowSeconds;
    switch (write.kind) {
      case 'claim':
      case 'put-completed': {
        if (!before) return undefined;
        if (before.status === 'PENDING' && !(before.expiresAt < now - write.skew)) {
          return `a lease not past its end by the ${write.skew} s margin (now ${now})`;
        }
        if (before.status === 'COMPLETED' && !(before.expiresAt < now))
          return `an unexpired completed record (now ${now})`;
        if (before.final && !(before.expiresAt < now)) return `an unexpired poisoned record (now ${now})`;
        const held = before.status === 'FAILED' && before.steps && before.expiresAt >= now;
        if (held && before.fingerprint !== write.fingerprint)
          return 'a released record that holds another request’s steps';
        if (write.kind === 'claim' && write.resumedSteps > 0) {
          if (before.status === 'COMPLETED' || before.fingerprint !== write.fingerprint) {
            return `it was handed ${write.resumedSteps} step(s) of another request or of a completed record`;
          }
          if (otherVersion(write, before) === 'refuse') {
            return `version ${write.version} was handed the steps version ${before.version ?? '(none)'} recorded`;
          }
        }
        return undefined;
      }
      case 'reopen':
        if (before?.status !== 'FAILED' || !before.final || before.token !== write.token)
          return 'not the poisoned record as it was read';
        return undefined;
      case 'revise':
        if (before?.status !== write.status || before.token !== write.token) return 'not the record as it was read';
        if (before.status === 'PENDING' && !(before.expiresAt < now))
          return 'a live lease (an operator’s step surgery)';
        if (before.status === 'COMPLETED') return 'a completed record (an operator’s step surgery)';
        return undefined;
      case 'remove':
        if (before?.status !== write.status || before.token !== write.token) return 'not the record as it was read';
        if (write.writer === 'sweep' && !(before.expiresAt < now - write.skew))
          return 'a sweep before its expiry and margin';
        return undefined;
      default:
        if (before?.status !== 'PENDING' || before.token !== write.token) return 'a record its claim does not own';
        if (write.writer === 'sweep' && !(before.expiresAt < now - write.skew)) {
          return `a sweep’s release of a lease not past its end by the margin (now ${now})`;
        }
        return undefined;
    }
  }

  private after(write: LandedWrite, before: Known | undefined): Known | undefined {
    const at = ++this.order;
    const now = write.nowSeconds;
    switch (write.kind) {
      case 'claim': {
        const { token, fingerprint, leaseSeconds, resumedSteps } = write;
        // A claim of the same unfinished request keeps its starts, whatever the store hands back; any other, none; nor
        // one that restarts another version's steps (`onVersionChange: 'restart'`, documented to run them again).
        const restarts = otherVersion(write, before) === 'restart';
        if (restarts) this.restartedByVersion.add(token);
        const resumes = before && before.status !== 'COMPLETED' && before.fingerprint === fingerprint && !restarts;
        const started = resumes ? new Map(before.started) : new Map<string, string>();
        const steps = resumedSteps > 0 || started.size > 0;
        const version = write.version ?? before?.version;
        const expiresAt = now + leaseSeconds;
        return { status: 'PENDING', token, expiresAt, fingerprint, steps, final: false, started, version, at };
      }
      case 'put-completed': {
        const { token, fingerprint, ttlSeconds } = write;
        const started = new Map<string, string>();
        const expiresAt = now + ttlSeconds;
        return { status: 'COMPLETED', token, expiresAt, fingerprint, steps: false, final: false, started, at };
      }
      case 'remove':
        return undefined;
      case 'reopen':
        return before && { ...before, final: false, at };
      case 'complete':
      case 'fail':
        return (
          before && {
            ...before,
            status: write.kind === 'fail' ? 'FAILED' : 'COMPLETED',
            final: write.kind === 'fail' && write.final !== false,
            expiresAt: now + write.ttlSeconds,
            at,
          }
        );
      case 'renew':
        return before && { ...before, expiresAt: now + write.leaseSeconds, at };
      case 'step': {
        const started = new Map(before?.started);
        started.delete(write.name);
        return before && { ...before, steps: true, started, at };
      }
      case 'step-start':
        return before && { ...before, steps: true, started: new Map(before.started).set(write.name, write.token), at };
      case 'revise': {
        const started = new Map(before?.started);
        for (const name of [...write.forget, write.settled ?? '']) started.delete(name);
        const expiresAt = now + write.ttlSeconds;
        return before && { ...before, status: 'FAILED', final: false, started, expiresAt, at };
      }
    }
  }
}

function describe(known: Known | undefined): string {
  return known
    ? `${known.status} ${known.token} (expires ${known.expiresAt}${known.steps ? ', with steps' : ''})`
    : 'no record';
}

/**
 * What a versioned claim must do with the record it meets, judged from the record the oracle knows: the same request,
 * unfinished, holding steps (recorded or started) of another version (or of none): its `onVersionChange`.
 */
function otherVersion(
  write: { fingerprint: string; version?: string; onVersionChange?: 'refuse' | 'resume' | 'restart' },
  before: Known | undefined,
): 'refuse' | 'restart' | undefined {
  if (write.version === undefined || write.onVersionChange === 'resume' || !before) return undefined;
  if (before.status === 'COMPLETED' || before.fingerprint !== write.fingerprint || !before.steps) return undefined;
  return before.version === write.version ? undefined : (write.onVersionChange ?? 'refuse');
}
