import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientRequest } from 'node:http';
import { runningClaim } from '../protocol/idempotency-context';
import { judgedBy, UnkeyedCallError } from './unkeyed-call-watch';

/**
 * Outgoing HTTP requests of protected calls, seen through `node:diagnostics_channel`: undici's `undici:request:create`
 * (the global `fetch`, and undici itself), `http.client.request.start` (`node:http`, so axios and `@nestjs/axios`) and
 * `http2.client.stream.created` (`node:http2`, published by Node 22.14 and later; Node 20 has no such channel).
 * A request other than GET, HEAD or OPTIONS without a key header is handed to the running claim's watch; with
 * `unkeyedCalls: 'error'` it is failed before a byte is sent. Requests of the AWS SDK (SigV4-signed API calls, the
 * module's own included) are not judged here: DynamoDB writes are, by `dynamodb-writes.ts`.
 */

const UNDICI_CHANNEL = 'undici:request:create';
const HTTP_CHANNEL = 'http.client.request.start';
const HTTP2_CHANNEL = 'http2.client.stream.created';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** What the observers read of a request. */
interface OutgoingRequest {
  method: string;
  host: string;
  /** A header's value (any case of its name), or undefined. */
  header(name: string): string | undefined;
}

/** An undici request as its diagnostics channel hands it: headers as a flat name/value list, or as raw lines. */
interface UndiciRequest {
  method: string;
  origin: string | URL;
  headers: string[] | string;
  onError(error: Error): void;
}

let observers = 0;

/** Starts observing (once per process, however many applications ask); the function stops this one's share. */
export function observeOutgoingRequests(): () => void {
  if (observers++ === 0) {
    subscribe(UNDICI_CHANNEL, onUndiciRequest);
    subscribe(HTTP_CHANNEL, onHttpRequest);
    subscribe(HTTP2_CHANNEL, onHttp2Stream);
  }
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    if (--observers > 0) return;
    unsubscribe(UNDICI_CHANNEL, onUndiciRequest);
    unsubscribe(HTTP_CHANNEL, onHttpRequest);
    unsubscribe(HTTP2_CHANNEL, onHttp2Stream);
  };
}

/** Whether this copy of the module observes requests now (Node's channels are shared by every copy in a process). */
export function observingOutgoingRequests(): boolean {
  return observers > 0;
}

function onUndiciRequest(message: unknown): void {
  const request = (message as { request: UndiciRequest }).request;
  const error = judged(() => ({
    method: request.method,
    host: new URL(String(request.origin)).host,
    header: (name) => undiciHeader(request.headers, name),
  }));
  if (error) request.onError(error);
}

function onHttpRequest(message: unknown): void {
  const request = (message as { request: ClientRequest }).request;
  const error = judged(() => ({
    method: request.method,
    host: String(request.getHeader('host') ?? request.host),
    header: (name) => {
      const value = request.getHeader(name);
      return value === undefined ? undefined : String(value);
    },
  }));
  if (error) request.destroy(error);
}

/** A `node:http2` stream as it is created: its pseudo-headers (`:method`, `:authority`) among its headers. */
function onHttp2Stream(message: unknown): void {
  const { stream, headers } = message as {
    stream: { destroy(error: Error): void };
    headers: Record<string, string | string[] | undefined>;
  };
  const error = judged(() => ({
    method: String(headers[':method'] ?? 'GET'),
    host: String(headers[':authority'] ?? ''),
    header: (name) => {
      const entry = Object.entries(headers).find(([key]) => key.toLowerCase() === name);
      return entry?.[1] === undefined ? undefined : String(entry[1]);
    },
  }));
  if (error) stream.destroy(error);
}

/** The error to stop a request with, after reporting it to the running claim's watch; undefined to let it go. */
function judged(read: () => OutgoingRequest): UnkeyedCallError | undefined {
  return judgedBy(runningClaim(), (watch) => {
    const request = read();
    const method = request.method.toUpperCase();
    if (SAFE_METHODS.has(method) || fromAwsSdk(request)) return undefined;
    for (const name of watch.keyHeaders) if (request.header(name)) return undefined;
    return { kind: 'http', operation: method, target: request.host };
  });
}

/**
 * A request of the AWS SDK: signed with SigV4, made by an SDK client (its invocation id), or the instance metadata
 * service's token request (made while the SDK looks for credentials).
 */
function fromAwsSdk(request: OutgoingRequest): boolean {
  return (
    request.header('amz-sdk-invocation-id') !== undefined ||
    request.header('x-aws-ec2-metadata-token-ttl-seconds') !== undefined ||
    request.header('authorization')?.startsWith('AWS4-HMAC-SHA256') === true
  );
}

function undiciHeader(headers: string[] | string, name: string): string | undefined {
  if (typeof headers === 'string') {
    const line = headers.split('\r\n').find((each) => each.slice(0, each.indexOf(':')).trim().toLowerCase() === name);
    return line?.slice(line.indexOf(':') + 1).trim();
  }
  for (let index = 0; index + 1 < headers.length; index += 2)
    if (headers[index].toLowerCase() === name) return String(headers[index + 1]);
  return undefined;
}
