import { createServer, request, Server } from 'node:http';
import { AddressInfo } from 'node:net';

export type FaultMode = 'pass' | 'throttle' | 'drop';

/**
 * An HTTP proxy in front of a DynamoDB endpoint that can throttle (answer the way DynamoDB does, with
 * ProvisionedThroughputExceededException) or drop connections, so faults reach the SDK over the wire.
 */
export interface FaultProxy {
  endpoint: string;
  mode: FaultMode;
  /** In 'throttle' mode, the share of calls throttled (the rest pass). Default 1: all. */
  throttleFraction: number;
  /**
   * In 'pass' mode: the next this many calls of `dropAnswersOf` (or of any operation when unset) reach DynamoDB, but
   * their answers are dropped (the connection is cut once DynamoDB has answered): a write that landed, whose client
   * saw only a socket error and retries it.
   */
  dropAnswers: number;
  dropAnswersOf?: string;
  /**
   * In 'pass' mode: the next `count` calls of `operation` are answered with this DynamoDB error (`type` is the
   * `__type` name, e.g. ReplicatedWriteConflictException; `fields` are added to the body, e.g. CancellationReasons)
   * without reaching DynamoDB.
   */
  failNext?: { operation: string; count: number; type: string; fields?: Record<string, unknown> };
  /** DynamoDB operations (X-Amz-Target suffixes) seen, in order. */
  operations: string[];
  /**
   * Answers of `operation` rewritten: DynamoDB's JSON answer goes through `rewrite` (as another DynamoDB would answer,
   * e.g. a DescribeTable of a global table). Its checksum header is dropped (the SDK checks it only when present).
   */
  rewrite?: { operation: string; rewrite(answer: Record<string, any>): Record<string, any> };
  /** Runs before a request of `operation` is passed on (to change the table between a read and a write, say). */
  before?: { operation: string; run(): Promise<void> };
  stop(): Promise<void>;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const proxy: FaultProxy = {
    endpoint: '',
    mode: 'pass',
    throttleFraction: 1,
    dropAnswers: 0,
    operations: [],
    stop: async () => undefined,
  };
  const server: Server = createServer(async (req, res) => {
    const operation =
      String(req.headers['x-amz-target'] ?? '')
        .split('.')
        .pop() ?? '';
    proxy.operations.push(operation);
    if (proxy.before?.operation === operation) {
      const { run } = proxy.before;
      proxy.before = undefined;
      req.pause(); // its body waits, buffered, for the pipe below
      await run();
    }
    if (proxy.mode === 'drop') return req.socket.destroy();
    if (proxy.mode === 'throttle' && Math.random() < proxy.throttleFraction) {
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
      return res.end(
        JSON.stringify({
          __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
          message: 'The level of configured provisioned throughput for the table was exceeded.',
        }),
      );
    }
    if (proxy.failNext && proxy.failNext.count > 0 && proxy.failNext.operation === operation) {
      proxy.failNext.count -= 1;
      const { type, fields } = proxy.failNext;
      req.resume();
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
      return res.end(
        JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${type}`, message: `injected ${type}`, ...fields }),
      );
    }
    const dropAnswer =
      proxy.dropAnswers > 0 && (proxy.dropAnswersOf === undefined || proxy.dropAnswersOf === operation);
    if (dropAnswer) proxy.dropAnswers -= 1;
    const upstream = request(target + req.url, { method: req.method, headers: req.headers }, (answer) => {
      if (dropAnswer) {
        answer.resume().on('end', () => req.socket.destroy());
        return;
      }
      if (proxy.rewrite?.operation === operation && answer.statusCode === 200) {
        const { rewrite } = proxy.rewrite;
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          const body = JSON.stringify(rewrite(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
          const headers: Record<string, unknown> = { ...answer.headers, 'content-length': Buffer.byteLength(body) };
          delete headers['x-amz-crc32'];
          res.writeHead(200, headers as Record<string, string>);
          res.end(body);
        });
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => req.socket.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.stop = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return proxy;
}
