import { spawn, spawnSync } from 'node:child_process';
import { freePort } from './free-port';

/**
 * A real Redis for the suites that need one (BullMQ): Debian's `redis-server`, started per suite on a free loopback
 * port, without persistence. Without it on PATH those suites are skipped, saying so; with REQUIRE_REDIS=1 (CI, whose
 * .ci/run installs it) that is a failure instead.
 */
export interface Redis {
  host: string;
  port: number;
  stop(): Promise<void>;
}

const redisMissing = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).status !== 0;
if (redisMissing && process.env.REQUIRE_REDIS === '1') {
  throw new Error("REQUIRE_REDIS=1 but redis-server is not on PATH: install Debian's redis-server package.");
}

/** `describe` for suites that need Redis; skipped, and named as skipped, without it. */
export const describeWithRedis: jest.Describe = redisMissing ? describe.skip : describe;

export async function startRedis(): Promise<Redis> {
  const port = await freePort();
  const server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${output}`)), 10_000);
    server.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then(() => reject(new Error(`redis-server exited:\n${output}`)));
  });
  return {
    host: '127.0.0.1',
    port,
    stop: async () => {
      server.kill('SIGKILL');
      await exited;
    },
  };
}
