import { spawn } from 'node:child_process';
import { SQSClient } from '@aws-sdk/client-sqs';
import { freePort } from './free-port';

/**
 * A local SQS for the suites that consume queues (`@ssut/nestjs-sqs`): `sqslite`, an npm package that answers SQS's
 * query protocol, in a process of its own on a free port. The query protocol is what `@aws-sdk/client-sqs` sent up to
 * 3.445.0, so the workspace pins that version (package.json's overrides) for every package that talks to SQS here.
 * sqslite recognises its queue URLs only on `localhost`, so the endpoint is named that way.
 */
export interface Sqs {
  endpoint: string;
  client(): SQSClient;
  stop(): Promise<void>;
}

const SERVER = `
const [port] = process.argv.slice(1);
require('sqslite')({ logger: false }).listen({ port: Number(port), host: 'localhost' })
  .then(() => process.stdout.write('listening\\n'))
  .catch((error) => { console.error(error); process.exit(1); });
`;

export async function startSqs(): Promise<Sqs> {
  const port = await freePort();
  const server = spawn(process.execPath, ['-e', SERVER, String(port)], {
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sqslite did not start:\n${output}`)), 10_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('listening')) {
        clearTimeout(timer);
        resolve();
      }
    };
    server.stdout!.on('data', read);
    server.stderr!.on('data', read);
    void exited.then(() => reject(new Error(`sqslite exited:\n${output}`)));
  });
  const endpoint = `http://localhost:${port}`;
  return {
    endpoint,
    client: () => sqsClient(endpoint),
    stop: async () => {
      server.kill('SIGKILL');
      await exited;
    },
  };
}

/** A client that never looks for credentials off this machine. */
export function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
}
