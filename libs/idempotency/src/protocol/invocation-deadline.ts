import { AsyncLocalStorage } from 'node:async_hooks';
import { hostname } from 'node:os';

/**
 * An invocation a call runs in (AWS Lambda): set around each one by `withLambdaContext`, read when a call is described
 * and when a protected call starts. A claim's lease never ends later than its deadline, and is not renewed past it; the
 * invocation does not end before the protected calls it started have settled (their outcomes stored), so that a
 * container frozen once its handler's promise resolves never leaves a claim PENDING behind an early answer.
 */
interface Invocation {
  /** Epoch milliseconds; `Infinity` when the invocation's time left is unknown. */
  deadlineMs: number;
  /** The protected calls started in it that have not settled yet. */
  pending: Set<Promise<unknown>>;
  /** Who holds the claims made in it (`lambda:<request id>`), when known. */
  holder?: string;
}

const invocations = new AsyncLocalStorage<Invocation>();

/**
 * Runs `work` as an invocation that must end by `deadlineMs` (epoch milliseconds), and resolves with its result once
 * every protected call it started has settled too (or the deadline has come: the Lambda service ends it then anyway).
 */
export async function runBefore<T>(deadlineMs: number, work: () => T | Promise<T>, holder?: string): Promise<T> {
  const invocation: Invocation = { deadlineMs, pending: new Set(), holder };
  try {
    return await invocations.run(invocation, work);
  } finally {
    await settledBeforeDeadline(invocation);
  }
}

/**
 * Who holds a claim made now (`IdempotencyRecord.holder`): the invocation's holder inside one (a Lambda request id),
 * else this process, as host and pid. Never request data.
 */
export function claimHolder(): string {
  return invocations.getStore()?.holder ?? PROCESS_HOLDER;
}

const PROCESS_HOLDER = `${hostname().slice(0, 100)}:${process.pid}`;

/** The current invocation's deadline in epoch seconds (rounded down), or undefined outside one (or with none known). */
export function invocationDeadlineSeconds(): number | undefined {
  const deadlineMs = invocations.getStore()?.deadlineMs;
  return deadlineMs === undefined || !Number.isFinite(deadlineMs) ? undefined : Math.floor(deadlineMs / 1000);
}

/** Keeps the current invocation (if any) from ending before `call` settles. Returns `call`. */
export function heldByInvocation<T>(call: Promise<T>): Promise<T> {
  const invocation = invocations.getStore();
  if (invocation === undefined) return call;
  invocation.pending.add(call);
  const done = () => invocation.pending.delete(call);
  call.then(done, done);
  return call;
}

/** Waits for the invocation's pending calls, including any they start meanwhile, but not past its deadline. */
async function settledBeforeDeadline(invocation: Invocation): Promise<void> {
  while (invocation.pending.size > 0) {
    const leftMs = invocation.deadlineMs - Date.now();
    if (leftMs <= 0) return;
    const calls = Promise.allSettled([...invocation.pending]);
    if (!Number.isFinite(leftMs)) {
      await calls;
      continue;
    }
    let timer: NodeJS.Timeout | undefined;
    // Unref'd: the Lambda runtime keeps the process alive while it awaits the invocation; nothing else should.
    const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, leftMs).unref()));
    await Promise.race([calls, deadline]);
    clearTimeout(timer);
  }
}
