import { connect } from 'node:net';

/**
 * Sends bytes a well-behaved client never would (control characters, raw UTF-8 and repeated header lines) and
 * returns the status code and headers. fetch() and node:http refuse to send such requests.
 */
export function rawPost(
  url: string,
  path: string,
  headers: Array<[string, Buffer | string]>,
  body: Buffer | string,
): Promise<{ status: number; headers: string; body: string }> {
  const { hostname, port } = new URL(url);
  const payload = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const head = Buffer.concat([
    Buffer.from(
      `POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\nConnection: close\r\nContent-Length: ${payload.length}\r\n`,
    ),
    ...headers.map(([name, value]) =>
      Buffer.concat([Buffer.from(`${name}: `), Buffer.from(value), Buffer.from('\r\n')]),
    ),
    Buffer.from('\r\n'),
  ]);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (!match) return reject(new Error(`no HTTP status in ${JSON.stringify(text.slice(0, 200))}`));
      const [head, ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(match[1]), headers: head, body: rest.join('\r\n\r\n') });
    });
    socket.write(Buffer.concat([head, payload]));
  });
}
