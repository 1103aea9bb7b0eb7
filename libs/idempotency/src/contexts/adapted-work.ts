import { StoreIf } from '../options/idempotency.options';
import { ProtectedWork } from '../protocol/idempotency.service';
import { StoredResponse } from '../repository/idempotency.record';
import { CallDescriber } from './call-describer';
import { ContextAdapter, InterceptedCall, ResponseState } from './context-adapter';

/**
 * One call of a protected handler as the protocol runs it, each step answered by its execution type's adapter. How the
 * handler itself is run is the subclass's: through the interceptor's `next.handle()`, or a provider method called.
 */
export abstract class AdaptedWork implements ProtectedWork<unknown> {
  /** In optimistic mode, the response's headers before the handler ran: a replay clears what the run added. */
  protected headersBefore?: string[];
  /** The result answers the call without ending it (an MCP tool's `input_required`): never final. */
  private interim = false;

  constructor(
    protected readonly call: InterceptedCall,
    protected readonly adapter: ContextAdapter,
    private readonly describer: CallDescriber,
    private readonly storeIf: StoreIf,
  ) {}

  abstract execute(): Promise<unknown>;

  get transport() {
    return this.adapter.transport ?? this.call.context.getType<'http' | 'rpc' | 'graphql' | 'method'>();
  }

  describe() {
    return this.describer.describe(this.call, this.adapter);
  }

  capture(value: unknown): StoredResponse {
    this.interim = this.adapter.interim?.(value) ?? false;
    return this.adapter.capture(value, this.call, this.responseState());
  }

  captureError(error: unknown): StoredResponse | undefined {
    return this.adapter.captureError(error, this.call, this.responseState());
  }

  isFinal(stored: StoredResponse, error?: unknown): boolean {
    if (error === undefined && this.interim) return false;
    return this.storeIf(stored.statusCode, error);
  }

  replay(stored: StoredResponse): unknown {
    return this.adapter.replay(stored, this.call, this.headersBefore);
  }

  origin() {
    return { transport: this.transport, operation: this.adapter.operation(this.call), mode: this.call.route.mode };
  }

  /** The response as the handler left it (HTTP), for what is stored. */
  protected responseState(): ResponseState | undefined {
    return undefined;
  }
}
