import { Answer, effectsOf, fetchAnswer, Sent, Target, TargetError } from './http-target';
import type { ConformanceOptions } from './options';

const PROTOCOL_VERSION = '2025-06-18';
const REPLAYED = 'nestjs-dynamodb-idempotency/replayed';
const PROBLEM = 'nestjs-dynamodb-idempotency/problem';

/**
 * An MCP server's tool over Streamable HTTP, its results read as HTTP answers so every scenario and profile applies:
 * a result is a 200 whose body is its content (`_meta` left out), a replay is marked when the result's `_meta` says
 * so, an `isError` result with a problem (`_meta[…/problem]`) has the problem's status and `Retry-After`, another
 * `isError` result is a 500, and a JSON-RPC error a 400. The key goes in the call's `_meta["idempotency-key"]`, or in
 * the argument `--key-arg` names.
 */
export class McpTarget implements Target {
  private session?: Promise<Record<string, string>>;
  private ids = 0;

  constructor(private readonly options: ConformanceOptions) {}

  async send(request: Sent): Promise<Answer> {
    const { options } = this;
    const headers = await (this.session ??= this.initialize());
    const args = JSON.parse(request.body ?? options.body ?? '{}') as Record<string, unknown>;
    const key = request.key === null ? undefined : (request.rawKey ?? request.key);
    const keyArg = options.mcp!.keyArg;
    const params = {
      name: options.mcp!.tool,
      arguments: keyArg && key !== undefined ? { ...args, [keyArg]: key } : args,
      ...(!keyArg && key !== undefined ? { _meta: { 'idempotency-key': key } } : {}),
    };
    const { answer, message } = await this.rpc(headers, 'tools/call', params);
    if (!message) return answer;
    if (message.error) return json(400, message.error);
    const { _meta: meta, ...result } = (message.result ?? {}) as { _meta?: Record<string, unknown>; isError?: boolean };
    const problem = meta?.[PROBLEM] as { status?: number; retryAfterSeconds?: number } | undefined;
    if (result.isError && problem?.status) {
      const retry: Record<string, string> =
        problem.retryAfterSeconds === undefined ? {} : { 'retry-after': String(problem.retryAfterSeconds) };
      return json(problem.status, result, { 'content-type': 'application/problem+json', ...retry });
    }
    if (result.isError) return json(500, result);
    return json(200, result, meta?.[REPLAYED] === true ? { 'idempotent-replayed': 'true' } : {});
  }

  effects(key: string): Promise<number | undefined> {
    return effectsOf(this.options, key);
  }

  /** The handshake: `initialize`, then `notifications/initialized`; the session's headers for every later call. */
  private async initialize(): Promise<Record<string, string>> {
    const base = { ...this.options.headers };
    const { answer, message } = await this.rpc(base, 'initialize', {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'nestjs-dynamodb-idempotency conformance', version: '1' },
    });
    if (!message?.result) throw new TargetError(`${this.options.url} did not initialize: ${answer.status}`);
    const session = answer.headers['mcp-session-id'];
    const headers = {
      ...base,
      ...(session ? { 'mcp-session-id': session } : {}),
      'mcp-protocol-version': PROTOCOL_VERSION,
    };
    await this.post(headers, { jsonrpc: '2.0', method: 'notifications/initialized' });
    return headers;
  }

  /** One JSON-RPC call; its message from a JSON or an event-stream answer, or none (the HTTP answer says why). */
  private async rpc(headers: Record<string, string>, method: string, params: unknown) {
    const id = ++this.ids;
    const answer = await this.post(headers, { jsonrpc: '2.0', id, method, params });
    const messages = (answer.headers['content-type'] ?? '').startsWith('text/event-stream')
      ? answer.body
          .toString('utf8')
          .split(/\r?\n/)
          .filter((line) => line.startsWith('data:'))
          .map((line) => parse(line.slice(5)))
      : [parse(answer.body.toString('utf8'))];
    const message = messages.find((each) => each?.id === id);
    return { answer, message };
  }

  private post(headers: Record<string, string>, body: unknown): Promise<Answer> {
    return fetchAnswer(this.options.url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(this.options.timeoutMs),
    });
  }
}

interface RpcMessage {
  id?: number;
  result?: unknown;
  error?: unknown;
}

function parse(text: string): RpcMessage | undefined {
  try {
    return JSON.parse(text) as RpcMessage;
  } catch {
    return undefined;
  }
}

function json(status: number, value: unknown, headers: Record<string, string> = {}): Answer {
  return {
    status,
    headers: { 'content-type': 'application/json', ...headers },
    body: Buffer.from(JSON.stringify(value)),
  };
}
