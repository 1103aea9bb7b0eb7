import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Proc } from './cluster';

const ROOT = join(__dirname, '..', '..');
const LISTENING = /Orders API listening on (http:\/\/\S+)/;

/** `npm start` as the README's multi-instance walk-through runs it: a build, then the demo. */
function npmStart(name: string): Proc {
  const env = { ...process.env, PORT: '0', MICROSERVICE_PORT: '0', NO_COLOR: '1' };
  return new Proc(name, spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true }));
}

it('`npm start` three times, each while the others build or load: all come up, no build removes what another loads', async () => {
  // Started 3 s apart, one instance's build overlaps another's loading of the library.
  const starts: Proc[] = [];
  try {
    for (const name of ['one', 'two', 'three']) {
      if (starts.length > 0) await sleep(3000);
      starts.push(npmStart(name));
    }
    const deadline = Date.now() + 100_000;
    while (Date.now() < deadline && starts.some((proc) => proc.alive && !LISTENING.test(proc.output))) await sleep(200);
    for (const proc of starts) {
      if (!LISTENING.test(proc.output)) throw new Error(`${proc.name} did not come up:\n${proc.output}`);
      const url = LISTENING.exec(proc.output)![1];
      expect((await fetch(`${url}/health`)).status).toBe(200);
    }
  } finally {
    // npm runs the demo as its child: stop the whole process group.
    for (const proc of starts) if (proc.alive) process.kill(-proc.child.pid!, 'SIGTERM');
  }
});
