// The latency of first requests when every DynamoDB call takes a same-Region round trip: an HTTP proxy in front of
// dynalite that holds each call LATENCY_MS (default 4 ms) before passing it on. Used by bench.mjs.
import { createServer, request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

export const LATENCY_MS = Number(process.env.BENCH_LATENCY_MS ?? 4);

/** A proxy to `target` (an http://host:port endpoint) that delays every request by `delayMs`; its endpoint. */
export async function startDelayProxy(target, delayMs = LATENCY_MS) {
  const { hostname, port } = new URL(target);
  const server = createServer((incoming, outgoing) => {
    const chunks = [];
    incoming.on('data', (chunk) => chunks.push(chunk));
    incoming.on('end', async () => {
      await sleep(delayMs);
      const forwarded = request(
        { hostname, port, method: incoming.method, path: incoming.url, headers: incoming.headers },
        (answer) => {
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(outgoing);
        },
      );
      forwarded.on('error', () => outgoing.destroy());
      forwarded.end(Buffer.concat(chunks));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${server.address().port}`,
    stop: () => new Promise((resolve) => server.close(resolve)),
  };
}
