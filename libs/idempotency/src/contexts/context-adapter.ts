import { ExecutionContext } from '@nestjs/common';
import { IdempotencyError } from '../errors/idempotency.errors';
import { IdempotentOptions, Scope } from '../options/idempotency.options';
import { StoredResponse } from '../repository/idempotency.record';

/** One call of a protected handler: its execution context and the settings of its route. */
export interface InterceptedCall {
  context: ExecutionContext;
  route: IdempotentOptions;
}

/** The status and replayable headers of a response as far as it has been set (HTTP only). */
export interface ResponseState {
  statusCode: number;
  headers: Record<string, string | string[]>;
  /** Whether the response was already sent (by the handler itself, through `@Res({ passthrough: true })`). */
  sent?: boolean;
}

/**
 * How one execution type (`getType()`: HTTP, RPC, GraphQL) plugs into the protocol: where its key comes from, what
 * its fingerprint covers, how its outcome is stored and replayed, and how a problem reaches its client. One file per
 * type under `contexts/`; the interceptor picks the adapter and runs the protocol the same way for all.
 */
export interface ContextAdapter {
  /** Its `transport` in metrics and outcome events, when not its `getType()` (an MCP tool is an RPC call). */
  readonly transport?: 'mcp';
  /** The scope when neither the route nor the module sets one (an MCP tool: its caller's principal). */
  defaultScope?: Scope;
  /** Where the call applies (`POST /orders`, `RPC "pattern"`, `GraphQL Mutation.pay`): part of its record key. */
  operation(call: InterceptedCall): string;
  /** The caller's key, undefined when there is none; throws `IdempotencyKeyInvalidError` for a malformed one. */
  key(call: InterceptedCall): unknown;
  /** The 400's detail when a required key is missing. */
  missingKey(call: InterceptedCall): string;
  /** The HTTP request behind the call (an HTTP route, a GraphQL operation over HTTP), for `scope` and warnings. */
  request(call: InterceptedCall): unknown;
  /** What the route's `key` and `fingerprint` functions are given: the HTTP request, the arguments, the message. */
  input(call: InterceptedCall): unknown;
  /**
   * SHA-256 of everything the handler can read of the call; refuses (throws) what it cannot read safely. A promise
   * only when it has to wait (files read from disk). `chosen`: the digest of the route's `fingerprint` function's
   * value, which stands for the request's parameters, query, body, arguments or message.
   */
  fingerprint(call: InterceptedCall, chosen?: string): string | Promise<string>;
  /** The live status and replayable headers (HTTP), read when the outcome is stored or the client is answered early. */
  responseState?(call: InterceptedCall): ResponseState;
  /** Whether the client went away (its connection closed) before its answer was sent. */
  clientGone?(call: InterceptedCall): boolean;
  /** A result that can be read only once (a `StreamableFile`), read into memory so that it is both sent and stored. */
  readResult?(value: unknown): unknown;
  /** What to store for the handler's result; `state` is the response as the handler left it (HTTP). */
  capture(value: unknown, call: InterceptedCall, state?: ResponseState): StoredResponse;
  /** What to store for an error the handler threw, or undefined when it cannot be replayed (the key is released). */
  captureError(error: unknown, call: InterceptedCall, state?: ResponseState): StoredResponse | undefined;
  /** The names of the headers the response carries so far (HTTP), to tell which ones a run of the handler added. */
  headerNames?(call: InterceptedCall): string[];
  /**
   * The stored outcome as this call's answer; throws the stored error again for an error outcome. `headersBefore`:
   * this call's own handler ran first (optimistic mode) and the response carried these headers before it; whatever
   * that run added is cleared, so the answer carries the stored response's headers only.
   */
  replay(stored: StoredResponse, call: InterceptedCall, headersBefore?: string[]): unknown;
  /** A protocol error (409, 422, 503 …) as this execution type's clients receive it. */
  problem(error: IdempotencyError, call: InterceptedCall): Error;
  /** A protocol error as a result rather than an error, where clients read results (an MCP tool's `isError`). */
  problemResult?(error: IdempotencyError, call: InterceptedCall): unknown;
  /**
   * A result that answers the call without ending it (an MCP tool's `input_required`): not stored, the key released
   * with its steps, so that the call sent again goes on where it stopped.
   */
  interim?(value: unknown): boolean;
}
