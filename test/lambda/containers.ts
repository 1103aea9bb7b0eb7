import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { LambdaHttpResponse } from './invocations';

/** An invocation's outcome as the Lambda service sees it: the function's response, or a timeout. */
export type Invocation = { timedOut: false; response: LambdaHttpResponse } | { timedOut: true };

/**
 * A Lambda container in a process of its own, as the Lambda service runs one: invoked with a time limit, frozen
 * (SIGSTOP: every timer and socket stops) when an invocation times out, thawed (SIGCONT) when it is reused.
 */
export class LambdaContainer {
  /** Everything the container wrote to stdout and stderr (its logs). */
  output = '';
  private readonly replies = new Map<number, (reply: { result?: LambdaHttpResponse; error?: string }) => void>();
  private invocations = 0;

  private constructor(private readonly child: ChildProcess) {
    child.stdout!.on('data', (chunk) => (this.output += chunk));
    child.stderr!.on('data', (chunk) => (this.output += chunk));
    child.on('message', (message: { id?: number; result?: LambdaHttpResponse; error?: string }) => {
      if (message.id !== undefined) this.replies.get(message.id)?.(message);
    });
  }

  /** A container running `script` (the demo's handler by default), configured by `env`. */
  static async start(
    env: Record<string, string>,
    script = join(__dirname, 'container.script.ts'),
  ): Promise<LambdaContainer> {
    const root = join(__dirname, '..', '..');
    const child = fork(join(root, 'test/support/run-ts.cjs'), [script], {
      cwd: root,
      env: { ...process.env, AWS_EC2_METADATA_DISABLED: 'true', NODE_NO_WARNINGS: '1', NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`the container exited (${code}) before it was ready`)));
    });
    return new LambdaContainer(child);
  }

  /**
   * Invokes the function with `remainingMs` to run; past it, the invocation times out and the container is frozen.
   * `freezeOnReply`: frozen as soon as the function's promise resolves too, as Lambda freezes a container between
   * invocations (nothing the handler left running goes on until the next invocation thaws it).
   */
  async invoke(event: unknown, remainingMs = 30_000, { freezeOnReply = false } = {}): Promise<Invocation> {
    const id = ++this.invocations;
    const deadlineMs = Date.now() + remainingMs;
    const reply = new Promise<{ result?: LambdaHttpResponse; error?: string }>((resolve) =>
      this.replies.set(id, resolve),
    );
    this.child.send({ id, event, deadlineMs });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), remainingMs)));
    const outcome = await Promise.race([reply, timeout]);
    clearTimeout(timer);
    if (outcome === 'timeout' || freezeOnReply) this.freeze();
    if (outcome === 'timeout') return { timedOut: true };
    if (outcome.error) throw new Error(`the function failed: ${outcome.error}`);
    return { timedOut: false, response: outcome.result! };
  }

  /** Resolves with the late reply of an invocation that timed out, once the container is thawed and it finishes. */
  lateReply(invocation = this.invocations): Promise<{ result?: LambdaHttpResponse; error?: string }> {
    return new Promise((resolve) => this.replies.set(invocation, resolve));
  }

  /** The container's process id (what `process.pid` says inside it). */
  get pid(): number {
    return this.child.pid!;
  }

  freeze(): void {
    this.child.kill('SIGSTOP');
  }

  thaw(): void {
    this.child.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    this.thaw();
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.disconnect();
    await exited;
  }
}
