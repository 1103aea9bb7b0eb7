import { Subscriber } from 'rxjs';
import { ResponseState } from './context-adapter';

/** What the client was answered with: a value, or an error. */
export type Answer = { value: unknown } | { error: unknown };

/**
 * The answer to the client of one protected call, kept apart from the handler's outcome: the client may be answered
 * before the handler's work is done (a timeout outside `@Idempotent()` unsubscribes, one inside answers with its
 * error), and the key stays owned until that work settles. The response's status and headers are read at the moment
 * the client is answered that way, so the status a timeout or a filter writes afterwards never becomes the outcome.
 */
export class ClientAnswer {
  /** True once the client was answered, or stopped listening, while the handler's work was still running. */
  early = false;
  /** Set when the handler's work has settled (its outcome is known). */
  handlerSettled = false;
  private open = true;
  private snapshot?: ResponseState;

  constructor(
    private readonly client: Subscriber<unknown>,
    private readonly readState: () => ResponseState | undefined,
  ) {}

  /** The response as the handler left it: as it was when the client was answered early, else as it is now. */
  state(): ResponseState | undefined {
    return this.snapshot ?? this.readState();
  }

  /** The protocol's answer: the handler's result, a replay, or a problem. Ignored when the client was answered. */
  send(answer: Answer): void {
    if (!this.open) return;
    this.open = false;
    if ('error' in answer) return this.client.error(answer.error);
    this.client.next(answer.value);
    this.client.complete();
  }

  /** An interceptor inside `@Idempotent()` answered while the handler still runs: the client gets that answer now. */
  sendEarly(answer: Answer): void {
    if (!this.open) return;
    this.markEarly();
    this.send(answer);
  }

  /** The client stopped listening (an outer timeout, a disconnect that tore the stream down). */
  abandon(): void {
    if (!this.open) return;
    this.open = false;
    this.markEarly();
  }

  private markEarly(): void {
    if (this.handlerSettled) return;
    this.early = true;
    this.snapshot = this.readState();
  }
}
