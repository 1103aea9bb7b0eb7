import { ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { IdempotencyError } from '../errors/idempotency.errors';
import { IdempotencyProblemException } from '../errors/problem';
import { fingerprintValue } from '../keys/fingerprint';
import { parseKeyHeader } from '../keys/idempotency-key';
import { McpKeySource, Scope } from '../options/idempotency.options';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { StoredResponse } from '../repository/idempotency.record';
import { replayedException, storedException } from '../response/stored-exception';
import { replayedBody, storedTypedResult } from '../response/stored-response.codec';
import { ContextAdapter, InterceptedCall } from './context-adapter';
import { MCP_KEY_ARGUMENT, MCP_META_PREFIX, McpToolCall, replayedToolResult, toolOf } from './mcp-results';

/** The `_meta` members of a call that may carry its key, in order. */
const META_KEYS = ['idempotency-key', 'idempotency_key'];
const DEFAULT_SOURCES: McpKeySource[] = ['argument', 'meta', 'header'];

/** Whether a call is an `@rekog/mcp-nest` tool call: an RPC call whose context is an `McpContext`. */
export function isMcpToolCall(context: ExecutionContext): boolean {
  if (context.getType() !== 'rpc') return false;
  const rpc = context.switchToRpc().getContext() as Partial<McpToolCall> | undefined;
  return typeof rpc?.getRawRequest === 'function' && rpc.mcpRequest?.method === 'tools/call';
}

/**
 * MCP tools (`@Tool()` of an `@rekog/mcp-nest` `@McpController`, a message handler underneath): the key from the tool's
 * `idempotencyKey` argument, the call's `_meta` or the HTTP request's `Idempotency-Key` header, in the route's order;
 * the scope the caller's principal (`req.user`); the fingerprint the tool's name and arguments less the key. Replays
 * and problems are `CallToolResult`s an agent reads: a replay says so in `_meta`, a problem is an `isError` result whose
 * text says what to do next, with its facts in `_meta`.
 */
@Injectable()
export class McpContextAdapter implements ContextAdapter {
  readonly transport = 'mcp';

  constructor(@Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions) {}

  operation({ context, route }: InterceptedCall): string {
    return route.name ?? `MCP tool ${toolOf(context).name}`;
  }

  key(call: InterceptedCall): unknown {
    const { context, route } = call;
    if (route.key) return route.key(this.input(call), context);
    const tool = toolOf(context);
    for (const source of route.mcp?.keySources ?? DEFAULT_SOURCES) {
      const key = this.keyFrom(source, call, tool);
      if (key !== undefined && key !== null && key !== '') return key;
    }
    return undefined;
  }

  missingKey({ route }: InterceptedCall): string {
    if (route.key) return 'This tool is idempotent; its key function found no key.';
    const sources = route.mcp?.keySources ?? DEFAULT_SOURCES;
    const where = sources.includes('argument')
      ? `add the "${keyArgument(route)}" argument`
      : sources.includes('meta')
        ? 'send it in _meta as "idempotency-key"'
        : `send it in the ${this.options.keyHeader} header`;
    return (
      `This tool is idempotent and needs an idempotency key: ${where}, a new unique value (a UUID) for each new ` +
      'action, and the same value when you retry that action.'
    );
  }

  request({ context }: InterceptedCall): unknown {
    return toolOf(context).request;
  }

  input({ context }: InterceptedCall): unknown {
    return context.switchToRpc().getData();
  }

  /** The caller's principal (`req.user`, set by a guard) when no `scope` is configured: its `sub`, `id` or client id. */
  defaultScope: Scope = (_context, request?: { user?: Record<string, unknown> | null }) => {
    const user = request?.user;
    if (user === undefined || user === null) return undefined;
    const id = user.sub ?? user.id ?? user.client_id ?? user.clientId;
    if (typeof id === 'string' || typeof id === 'number') return id;
    throw new TypeError('req.user has no sub, id or client_id: set the scope option to name the caller');
  };

  fingerprint({ context, route }: InterceptedCall, chosen?: string): string {
    const args =
      chosen === undefined ? withoutKey(context.switchToRpc().getData(), keyArgument(route)) : { $fingerprint: chosen };
    return fingerprintValue(['MCP', route.name ?? toolOf(context).name, args]);
  }

  /**
   * The result as recorded values (Dates, Maps… kept); one those cannot record (a function member, a class with
   * members of its own) as the JSON the client was sent: replaying that JSON sends the same text again, one answer.
   * A result JSON cannot write either (a cycle) reached the client as an error: stored without a body.
   */
  capture(value: unknown): StoredResponse {
    try {
      return storedTypedResult(value);
    } catch (error) {
      const json = JSON.stringify(value);
      if (json === undefined) throw error;
      return { statusCode: 200, headers: {}, body: JSON.parse(json) };
    }
  }

  captureError(error: unknown): StoredResponse | undefined {
    return storedException(error, { rpc: true });
  }

  /** An `input_required` answer (a multi round-trip request) is not the outcome: the re-sent call goes on. */
  interim(value: unknown): boolean {
    return (value as { resultType?: unknown } | null)?.resultType === 'input_required';
  }

  replay(stored: StoredResponse, { context, route }: InterceptedCall): unknown {
    if (stored.exception) throw replayedException(stored);
    return replayedToolResult(replayedBody(stored), context, route.mcp?.replayText === true);
  }

  problem(error: IdempotencyError): Error {
    return IdempotencyProblemException.from(error);
  }

  /** A problem as the `isError` result a model reads: what happened, what to do, and the same facts in `_meta`. */
  problemResult(error: IdempotencyError): unknown {
    const { problem, headers } = IdempotencyProblemException.from(error);
    const retryAfter = headers['Retry-After'] === undefined ? undefined : Number(headers['Retry-After']);
    const retry =
      retryAfter === undefined
        ? ''
        : ` Retry in ${retryAfter} seconds with the same idempotency key and the same arguments; a new key would run ` +
          'the action again.';
    return {
      content: [{ type: 'text', text: `${problem.title}. ${problem.detail}${retry}` }],
      isError: true,
      _meta: {
        [`${MCP_META_PREFIX}problem`]: {
          ...problem,
          ...(retryAfter === undefined ? {} : { retryAfterSeconds: retryAfter }),
        },
      },
    };
  }

  private keyFrom(source: McpKeySource, call: InterceptedCall, tool: ReturnType<typeof toolOf>): unknown {
    if (source === 'argument')
      return (this.input(call) as Record<string, unknown> | undefined)?.[keyArgument(call.route)];
    if (source === 'meta') return META_KEYS.map((name) => tool.meta?.[name]).find((value) => value !== undefined);
    const headers = (tool.request as { headers?: Record<string, string | string[] | undefined> } | undefined)?.headers;
    return parseKeyHeader(headers?.[this.options.keyHeader.toLowerCase()]);
  }
}

function keyArgument(route: InterceptedCall['route']): string {
  return route.keyFrom?.arg ?? MCP_KEY_ARGUMENT;
}

/** The tool's arguments less the key's, which names the call rather than saying what it does. */
function withoutKey(args: unknown, name: string): unknown {
  if (!args || typeof args !== 'object' || Array.isArray(args)) return args;
  const { [name]: _key, ...rest } = args as Record<string, unknown>;
  return rest;
}
