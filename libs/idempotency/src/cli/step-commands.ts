import { IdempotencyAdmin } from '../admin/idempotency-admin';
import { RecordReport } from '../admin/record-report';
import { StepResolution } from '../admin/step-surgery';
import { Logger } from '@nestjs/common';
import { CliCommand, CliContext, StderrLogger, UsageError } from './cli-context';
import { adminOf, onTable, printResult, SELECTOR_FLAGS, SELECTOR_USAGE, selectorOf } from './key-commands';

/**
 * Step surgery on one request (docs/recovery-points.md): list its steps, restart it from a step, settle an at-most-once
 * step whose outcome is unknown. Each write is conditioned on the record as read and refused for a live lease; each is
 * logged with the access key of the credentials in use (who ran it).
 */
export const STEP_COMMANDS = {
  'keys:steps': {
    summary:
      "list a request's steps: name, recorded or started (outcome unknown), attempt, run, size; values with --show-values",
    usage: `keys:steps ${SELECTOR_USAGE} [--show-values] [flags]`,
    flags: { ...SELECTOR_FLAGS, 'show-values': { type: 'boolean' } },
    run: onTable(steps),
  },
  'keys:restart': {
    summary: 'forget a step and every step recorded after it, and release the key: the next retry runs from that step',
    usage: `keys:restart ${SELECTOR_USAGE} --from-step NAME [flags]`,
    flags: { ...SELECTOR_FLAGS, 'from-step': { type: 'string' } },
    run: onTable(restart),
  },
  'keys:resolve-step': {
    summary:
      'settle an at-most-once step whose outcome is unknown: --done JSON (its result; the retry continues after it) or --not-done (the retry runs it)',
    usage: `keys:resolve-step NAME ${SELECTOR_USAGE} (--done JSON | --not-done) [flags]`,
    flags: { ...SELECTOR_FLAGS, done: { type: 'string' }, 'not-done': { type: 'boolean' } },
    run: onTable(resolve),
  },
} satisfies Record<string, CliCommand>;

async function steps(context: CliContext): Promise<number> {
  const admin = adminOf(context);
  const report = await admin.inspect(selectorOf(context), { showBody: context.values['show-values'] === true });
  if (!report) {
    context.print({ found: false }, ['no record for this key']);
    return 1;
  }
  context.print(stepListing(report), stepLines(report));
  return 0;
}

/** A request's steps as `keys:steps --json` prints them. */
function stepListing(report: RecordReport) {
  return {
    key: report.key,
    status: report.status,
    ...(report.handlerVersion === undefined ? {} : { handlerVersion: report.handlerVersion }),
    steps: [
      ...(report.steps ?? []).map((step) => ({ ...step, state: 'recorded' as const })),
      ...(report.startedSteps ?? []).map((step) => ({ ...step, state: 'started' as const })),
    ],
  };
}

function stepLines(report: RecordReport): string[] {
  const listing = stepListing(report);
  const head = `${report.status} ${report.key}${listing.handlerVersion === undefined ? '' : `, handler version ${listing.handlerVersion}`}`;
  if (listing.steps.length === 0) return [head, 'no steps'];
  return [
    head,
    ...(report.steps ?? []).map(
      ({ name, recordedAt, attempt, run, bytes, result }) =>
        `recorded  ${JSON.stringify(name)}  attempt ${attempt}, run ${run ?? '?'}, ${recordedAt}, ${bytes ?? '?'} bytes` +
        (result === undefined ? '' : `, value ${JSON.stringify(result)}`),
    ),
    ...(report.startedSteps ?? []).map(
      ({ name, startedAt, attempt }) =>
        `started   ${JSON.stringify(name)}  attempt ${attempt}, ${startedAt}: not recorded, its outcome unknown (keys:resolve-step)`,
    ),
  ];
}

async function restart(context: CliContext): Promise<number> {
  const from = context.values['from-step'];
  if (typeof from !== 'string' || from === '') throw new UsageError('keys:restart needs --from-step NAME');
  return revise(context, (admin, operator) =>
    admin.reviseSteps(selectorOf(context), { restartFrom: from }, { operator }),
  );
}

async function resolve(context: CliContext): Promise<number> {
  const name = context.positionals.find((word) => word !== 'keys:resolve-step');
  if (name === undefined) throw new UsageError('keys:resolve-step needs the step NAME');
  const done = context.values.done;
  const notDone = context.values['not-done'] === true;
  if ((done === undefined) === !notDone)
    throw new UsageError('keys:resolve-step needs one of --done JSON or --not-done');
  let resolution: StepResolution = { notDone: true };
  if (typeof done === 'string') {
    try {
      resolution = { done: JSON.parse(done) as unknown };
    } catch (error) {
      throw new UsageError(`--done is the step's result as JSON: ${(error as Error).message}`);
    }
  }
  return revise(context, (admin, operator) =>
    admin.reviseSteps(selectorOf(context), { resolve: name, resolution }, { operator }),
  );
}

/** Runs a surgery with who runs it: the access key of the credentials in use (`unknown` if they cannot be read). */
async function revise(
  context: CliContext,
  surgery: (admin: IdempotencyAdmin, operator: string) => ReturnType<IdempotencyAdmin['reviseSteps']>,
): Promise<number> {
  Logger.overrideLogger(new StderrLogger()); // the surgery's record; stdout is the result's (--json)
  const credentials = await context.client.config.credentials().catch(() => undefined);
  const operator = credentials?.accessKeyId ? `access key ${credentials.accessKeyId}` : 'unknown';
  return printResult(context, await surgery(adminOf(context), operator));
}
