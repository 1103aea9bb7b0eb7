import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';

export type EventSource = 'api-gateway-v2' | 'api-gateway-v1' | 'alb';
export const EVENT_SOURCES: EventSource[] = ['api-gateway-v2', 'api-gateway-v1', 'alb'];

/** A recorded POST /orders event of the source, with this key (none when undefined) and JSON body. */
export function orderEvent(source: EventSource, key: string | undefined, body: unknown): Record<string, unknown> {
  const event = JSON.parse(readFileSync(join(__dirname, 'fixtures', `${source}.json`), 'utf8'));
  const text = JSON.stringify(body);
  event.body = text;
  const headers: Record<string, string> = event.headers;
  const lengthHeader = Object.keys(headers).find((name) => name.toLowerCase() === 'content-length');
  if (lengthHeader) headers[lengthHeader] = String(Buffer.byteLength(text));
  if (key !== undefined) {
    headers['Idempotency-Key'] = key;
    if (event.multiValueHeaders) event.multiValueHeaders['Idempotency-Key'] = [key];
  }
  return event;
}

/**
 * A recorded event of the source sent to another path of the API (`POST /orders/{id}/receipts`, say): without a body,
 * or with this JSON body.
 */
export function pathEvent(source: EventSource, key: string, path: string, body?: unknown): Record<string, unknown> {
  const event = orderEvent(source, key, body ?? {});
  if (body === undefined) withoutBody(event);
  const context = event.requestContext as Record<string, unknown> & { http?: { path: string } };
  if (source === 'api-gateway-v2') {
    event.rawPath = path;
    context.http!.path = path;
  } else {
    event.path = path;
    if (source === 'api-gateway-v1') {
      event.resource = path;
      context.resourcePath = path;
      context.path = `/prod${path}`;
    }
  }
  return event;
}

/** The event without its body and its content headers. */
function withoutBody(event: Record<string, unknown>): void {
  delete event.body;
  const headers = event.headers as Record<string, string>;
  for (const name of Object.keys(headers)) if (/^content-(length|type)$/i.test(name)) delete headers[name];
  const multiValueHeaders = event.multiValueHeaders as Record<string, string[]> | undefined;
  for (const name of Object.keys(multiValueHeaders ?? {})) {
    if (/^content-(length|type)$/i.test(name)) delete multiValueHeaders![name];
  }
}

/** A Lambda context whose invocation must end `remainingMs` from now. */
export function lambdaContext(remainingMs = 30_000): Context {
  const deadline = Date.now() + remainingMs;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: 'orders-api',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:orders-api',
    memoryLimitInMB: '512',
    awsRequestId: `req-${Math.random().toString(16).slice(2)}`,
    logGroupName: '/aws/lambda/orders-api',
    logStreamName: '2026/12/01/[$LATEST]0123456789abcdef',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** The parts of a Lambda HTTP response the tests read, whatever the source's shape (`multiValueHeaders` on v1). */
export interface LambdaHttpResponse {
  statusCode: number;
  headers?: Record<string, string>;
  multiValueHeaders?: Record<string, string[]>;
  body: string;
  isBase64Encoded: boolean;
}

/** A response header, by lower-case name, from `headers` or `multiValueHeaders`. */
export function header(response: LambdaHttpResponse, name: string): string | undefined {
  const single = Object.entries(response.headers ?? {}).find(([key]) => key.toLowerCase() === name)?.[1];
  if (single !== undefined) return single;
  return Object.entries(response.multiValueHeaders ?? {})
    .find(([key]) => key.toLowerCase() === name)?.[1]
    ?.join(', ');
}

/**
 * A container's side of containers.ts: invocations arrive over IPC with their deadlines, and the handler's result
 * (or error) goes back; `close` runs when the parent disconnects, then the process exits.
 */
export function serveInvocations(
  handler: (event: unknown, context: Context) => Promise<unknown>,
  close: () => Promise<void>,
): void {
  process.on('message', async (message: { id: number; event: unknown; deadlineMs: number }) => {
    const context = lambdaContext(message.deadlineMs - Date.now());
    try {
      process.send!({ id: message.id, result: await handler(message.event, context) });
    } catch (error) {
      process.send!({ id: message.id, error: String(error) });
    }
  });
  process.on('disconnect', () => void close().finally(() => process.exit(0)));
  process.send!({ ready: true });
}
