import { ExecutionContext, Inject, Injectable, Logger, StreamableFile } from '@nestjs/common';
import { HttpAdapterHost, ModuleRef, Reflector } from '@nestjs/core';
import { applicationConfigOf } from '../nest-internals';
import { ClassSerialization } from './class-serializer';
import { REPLAYED_HEADER } from '../idempotency.constants';
import { IdempotencyBodyUnreadableError, IdempotencyError } from '../errors/idempotency.errors';
import { IdempotencyProblemException } from '../errors/problem';
import { parseKeyHeader } from '../keys/idempotency-key';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../options/resolved-options';
import { StoredResponse } from '../repository/idempotency.record';
import { requestVersion, routeTemplate } from './route-identity';
import { replayedException, storedException } from '../response/stored-exception';
import { bufferedFile, omitted, replayedBody, storableBody } from '../response/stored-response.codec';
import { ContextAdapter, InterceptedCall, ResponseState } from './context-adapter';
import { requestFingerprint } from './http-request';

/** Methods that are safe by HTTP semantics: `@Idempotent()` on them is almost always a mistake. */
export const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * HTTP routes (Express and Fastify, through Nest's `HttpAdapterHost`): the key from the `Idempotency-Key` header or the
 * route's `key` function, the fingerprint over method, route, parameters, query, body and uploaded files, the outcome
 * as status, allow-listed headers and body, errors as `application/problem+json`.
 */
@Injectable()
export class HttpContextAdapter implements ContextAdapter {
  private readonly logger = new Logger('Idempotency');
  private readonly serialization: ClassSerialization;
  /** What was logged once per route (`<what> <operation>`): a body nothing parsed, a response the handler sent. */
  private readonly loggedOnce = new Set<string>();

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly moduleRef: ModuleRef,
    reflector: Reflector,
    @Inject(RESOLVED_IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {
    this.serialization = new ClassSerialization(reflector, moduleRef);
  }

  /** `POST /orders` (with the version that served it, if versioned), or the route's stable `name`. */
  operation(call: InterceptedCall): string {
    if (call.route.name) return call.route.name;
    const { method, route } = this.identity(call);
    return `${method} ${route}`;
  }

  key({ context, route }: InterceptedCall): unknown {
    const request = requestOf(context);
    if (route.key) return route.key(request, context);
    return parseKeyHeader(request.headers?.[this.options.keyHeader.toLowerCase()]);
  }

  missingKey({ context }: InterceptedCall): string {
    const detail = `This operation is idempotent and requires an ${this.options.keyHeader} header.`;
    const method = this.method(requestOf(context));
    if (!SAFE_METHODS.has(method)) return detail;
    return `${detail} (A ${method} is safe to repeat by HTTP semantics; this route asks for a key because it is @Idempotent().)`;
  }

  request({ context }: InterceptedCall): unknown {
    return requestOf(context);
  }

  input({ context }: InterceptedCall): unknown {
    return requestOf(context);
  }

  fingerprint(call: InterceptedCall, chosen?: string): string | Promise<string> {
    const { method, route } = this.identity(call);
    try {
      const fingerprint = requestFingerprint(requestOf(call.context), method, route, chosen);
      if (typeof fingerprint === 'string') return fingerprint;
      return fingerprint.catch((error: unknown) => this.unreadable(error, `${method} ${route}`));
    } catch (error) {
      return this.unreadable(error, `${method} ${route}`);
    }
  }

  responseState({ context }: InterceptedCall): ResponseState {
    const response = responseOf(context);
    return {
      statusCode: (response as { statusCode: number }).statusCode,
      headers: this.replayableHeaders(response),
      sent: this.adapterHost.httpAdapter.isHeadersSent(response) === true,
    };
  }

  clientGone({ context }: InterceptedCall): boolean {
    const request = requestOf(context);
    const response = responseOf(context);
    const raw = response.raw ?? response;
    return Boolean((request.raw ?? request).socket?.destroyed) && !raw.writableFinished;
  }

  /** A file is read once, to be both sent and stored. */
  readResult(value: unknown): Promise<unknown> | unknown {
    return value instanceof StreamableFile ? bufferedFile(value) : value;
  }

  /** The body as the client receives it, with the status and headers the handler left on the response. */
  capture(value: unknown, call: InterceptedCall, state: ResponseState): StoredResponse {
    const { context } = call;
    // The handler sent the response itself (`res.json()` beside `@Res({ passthrough: true })`): the module never saw
    // the body, so it stores none rather than an empty one; duplicates get 409 response-not-stored.
    if (state.sent) {
      this.writtenByHandler(call);
      return { statusCode: state.statusCode, headers: state.headers, ...omitted('sent-by-handler') };
    }
    let stored: Omit<StoredResponse, 'statusCode' | 'headers'>;
    try {
      stored = storableBody(this.serialization.asSent(value, context));
    } catch {
      stored = omitted('not-json'); // the serializer threw: the client got an error from it, the work is done
    }
    return { statusCode: state.statusCode, headers: state.headers, ...stored };
  }

  captureError(error: unknown, _call: InterceptedCall, state: ResponseState): StoredResponse | undefined {
    return storedException(error, { headers: state.headers });
  }

  /**
   * A duplicate gets the stored status, headers and body, marked `Idempotent-Replayed: true`. A stored error is thrown
   * again, so the app's exception filters answer it exactly as they answered the first request.
   */
  replay(stored: StoredResponse, { context }: InterceptedCall, headersBefore?: string[]): unknown {
    const adapter = this.adapterHost.httpAdapter;
    const response = responseOf(context);
    if (headersBefore) clearHeadersAddedSince(response, headersBefore);
    for (const [name, value] of Object.entries(stored.headers)) adapter.setHeader(response, name, value as string);
    adapter.setHeader(response, REPLAYED_HEADER, 'true');
    if (stored.exception) throw replayedException(stored);
    adapter.status(response, stored.statusCode);
    return replayedBody(stored);
  }

  /** A request header's value (an outcome door's `Prefer`). */
  requestHeader(context: ExecutionContext, name: string): unknown {
    return requestOf(context).headers?.[name];
  }

  /** Sets a response header (an outcome door's `Preference-Applied`). */
  setHeader(context: ExecutionContext, name: string, value: string): void {
    this.adapterHost.httpAdapter.setHeader(responseOf(context), name, value);
  }

  headerNames({ context }: InterceptedCall): string[] {
    return headerNamesOf(responseOf(context));
  }

  problem(error: IdempotencyError): Error {
    return IdempotencyProblemException.from(error);
  }

  /** Logs, once per route, why a response the handler sent itself is not replayed. */
  private writtenByHandler(call: InterceptedCall): void {
    const operation = this.operation(call);
    if (!this.firstTime(`sent ${operation}`)) return;
    this.logger.warn({
      msg: 'the handler sent the response itself (res.json()/res.send() with @Res({ passthrough: true })), so its body cannot be stored: the key is recorded as done without a body and duplicates get 409 response-not-stored. Return the body instead of sending it',
      operation,
    });
  }

  /**
   * A body that could not be fingerprinted answers 415 body-unreadable (the client sent a content type nothing here
   * reads); why, and the fix, go to the log once per route. Every error is thrown on.
   */
  private unreadable(error: unknown, operation: string): never {
    if (error instanceof IdempotencyBodyUnreadableError && this.firstTime(`unreadable ${operation}`)) {
      this.logger.warn({
        msg: 'answering 415 body-unreadable: the body could not be fingerprinted (logged once per route)',
        operation,
        reason: error.message,
      });
    }
    throw error;
  }

  private firstTime(what: string): boolean {
    if (this.loggedOnce.has(what)) return false;
    this.loggedOnce.add(what);
    return true;
  }

  /** The method and the route: its `name`, else the template (with the API version that served the request). */
  private identity({ context, route: options }: InterceptedCall): { method: string; route: string } {
    const request = requestOf(context);
    if (options.name) return { method: this.method(request), route: options.name };
    const version = requestVersion(context, request, applicationConfigOf(this.moduleRef)?.getVersioning());
    const template = routeTemplate(context);
    return { method: this.method(request), route: version === undefined ? template : `${template} version=${version}` };
  }

  private method(request: unknown): string {
    return String(this.adapterHost.httpAdapter.getRequestMethod(request)).toUpperCase();
  }

  /** The allow-listed headers the response carries so far; a header set more than once keeps its separate values. */
  private replayableHeaders(response: unknown): Record<string, string | string[]> {
    const adapter = this.adapterHost.httpAdapter;
    const headers: Record<string, string | string[]> = {};
    for (const name of this.options.replayHeaders) {
      const value = adapter.getHeader(response, name);
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.map(String) : String(value);
    }
    return headers;
  }
}

/**
 * The request and the response of an HTTP call: its first two arguments, as `switchToHttp()` reads them, without the
 * three functions that `switchToHttp()` makes on every call (the adapter reads them several times per call).
 */
function requestOf(context: ExecutionContext): any {
  return context.getArgByIndex(0);
}

function responseOf(context: ExecutionContext): any {
  return context.getArgByIndex(1);
}

/** The header names set on a response so far: Node's (Express) or Fastify's reply, with its raw response's. */
function headerNamesOf(response: any): string[] {
  if (typeof response.getHeaderNames === 'function') return response.getHeaderNames();
  const names = new Set(Object.keys(response.getHeaders?.() ?? {}).map((name) => name.toLowerCase()));
  for (const name of response.raw?.getHeaderNames?.() ?? []) names.add(name);
  return [...names];
}

/** Removes the headers a run of the handler added (a losing optimistic run's `Set-Cookie`, `ETag`, ids). */
function clearHeadersAddedSince(response: any, before: string[]): void {
  const kept = new Set(before);
  for (const name of headerNamesOf(response)) {
    if (kept.has(name)) continue;
    response.removeHeader?.(name);
    response.raw?.removeHeader?.(name);
  }
}
