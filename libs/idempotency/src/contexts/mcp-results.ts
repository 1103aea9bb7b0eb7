import { ExecutionContext } from '@nestjs/common';

/** The argument that carries the key unless the route's `keyFrom: { arg }` names another. */
export const MCP_KEY_ARGUMENT = 'idempotencyKey';
/** The prefix of the `_meta` members this module writes on a tool's results. */
export const MCP_META_PREFIX = 'nestjs-dynamodb-idempotency/';
/** `@rekog/mcp-nest`'s metadata key for a `@Tool()`'s options. */
export const MCP_TOOL_METADATA = 'mcp:tool';
/** Its metadata keys for the handlers that only read (`@Resource()`, `@ResourceTemplate()`, `@Prompt()`). */
export const MCP_READS = ['mcp:resource', 'mcp:resource-template', 'mcp:prompt'];

/** What `@rekog/mcp-nest`'s `McpContext` (the RPC context of a tool call) offers, read without importing it. */
export interface McpToolCall {
  mcpRequest: { method: string; params?: { name?: string; _meta?: Record<string, unknown> } };
  getRawRequest(): unknown;
}

/** A `CallToolResult` as far as this module reads or writes one. */
interface ToolResult {
  content: unknown[];
  structuredContent?: unknown;
  isError?: boolean;
  _meta?: Record<string, unknown>;
}

/** A tool's options as `@Tool()` records them. */
interface ToolMetadata {
  outputSchema?: unknown;
  annotations?: { idempotentHint?: boolean } & Record<string, unknown>;
}

/** The tool call behind an execution context: the tool's name, the call's `_meta`, the HTTP request. */
export function toolOf(context: ExecutionContext): { name: string; meta?: Record<string, unknown>; request: unknown } {
  const call = context.switchToRpc().getContext() as McpToolCall;
  const params = call.mcpRequest.params;
  return { name: params?.name ?? 'unknown', meta: params?._meta, request: call.getRawRequest() };
}

const REPLAY_TEXT =
  'Replayed: this is the result of an earlier call with the same idempotency key; the action did not run again.';

/**
 * A stored result as the replay's `CallToolResult`: as the tool returned it when it returned one, else formatted the
 * way `@rekog/mcp-nest` formats a plain value (JSON text, and `structuredContent` read by the tool's output schema);
 * `_meta` says it is a replay, and with `withText` so does a first line of text.
 */
export function replayedToolResult(value: unknown, context: ExecutionContext, withText: boolean): ToolResult {
  const result: ToolResult = isToolResult(value) ? { ...value } : formatted(value, context);
  result._meta = { ...result._meta, [`${MCP_META_PREFIX}replayed`]: true };
  if (withText) result.content = [{ type: 'text', text: REPLAY_TEXT }, ...result.content];
  return result;
}

/** Marks an idempotent tool `idempotentHint: true` in its annotations (what `tools/list` says), unless the app set it. */
export function hintIdempotent(handler: unknown): void {
  if (typeof handler !== 'function') return;
  const tool = Reflect.getMetadata(MCP_TOOL_METADATA, handler) as ToolMetadata | undefined;
  if (!tool || tool.annotations?.idempotentHint !== undefined) return;
  tool.annotations = { ...tool.annotations, idempotentHint: true };
}

function isToolResult(value: unknown): value is ToolResult {
  return typeof value === 'object' && value !== null && Array.isArray((value as ToolResult).content);
}

function formatted(value: unknown, context: ExecutionContext): ToolResult {
  const content = [{ type: 'text', text: JSON.stringify(value) }];
  const schema = (Reflect.getMetadata(MCP_TOOL_METADATA, context.getHandler()) as ToolMetadata | undefined)
    ?.outputSchema as { '~standard'?: { validate(value: unknown): unknown } } | undefined;
  if (!schema) return { content };
  const validated = schema['~standard']?.validate(value) as { value?: unknown; issues?: unknown } | undefined;
  const structured = validated && !('then' in validated) && !validated.issues ? validated.value : value;
  return { structuredContent: structured, content };
}
