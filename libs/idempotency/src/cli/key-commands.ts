import { AdminResult, IdempotencyAdmin, KeySelector } from '../admin/idempotency-admin';
import { RecordReport } from '../admin/record-report';
import { DynamoDbIdempotencyRepository } from '../dynamodb/dynamodb-idempotency.repository';
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { dynamoErrorCode } from '../dynamodb/dynamodb-errors';
import { keySchemaProblem, locationOf, unusableBecause } from '../dynamodb/table-checks';
import { TableLayout } from '../dynamodb/table-layout';
import { IdempotencyStatus } from '../repository/idempotency.record';
import { scanCostInWords } from '../observability/sweep-cost';
import { CliCommand, CliContext, durationSeconds, sealerOf, UsageError } from './cli-context';

export const SELECTOR_FLAGS = {
  route: { type: 'string' },
  key: { type: 'string' },
  scope: { type: 'string' },
  version: { type: 'string' },
  name: { type: 'string' },
  'record-key': { type: 'string' },
  partition: { type: 'string' },
} as const;

/** Why a key may have no record although requests used it: the selector is not the one the module derived. */
const NOT_FOUND_HINT = `No record has the key this selector derives. Check:
  --scope      the caller's scope exactly as the app's scope function returns it (a number as its digits)
  --route      the route's method and template as Nest declares it, e.g. 'POST /orders/:id' (no trailing slash,
               the global prefix included), with --version for a versioned route; or --name for a route's stable name
               ('RPC ["pattern"]' for a message handler, 'GraphQL Mutation.field' for a GraphQL mutation,
               'Class.method' for a provider method, 'fn <operation>' for execute() and processBatch)
  --partition  with a sort key: the record's partition when the app sets partitionKeyValue
keys:list lists what is there.`;

export const SELECTOR_USAGE = `--route 'POST /orders' --key <client key> [--scope <scope>] [--version <v>] | --name <operation> --key <client key> [--scope] | --record-key <key> [--partition <value>]`;

export const KEY_COMMANDS = {
  'keys:locate': {
    summary:
      'print the record key of a client key exactly as the module derives it (and its item key, and how to read it)',
    usage: `keys:locate ${SELECTOR_USAGE} [flags]`,
    flags: SELECTOR_FLAGS,
    run: asUsage(locate),
  },
  'keys:inspect': {
    summary: 'print a record: status, times, fingerprint, the stored status and size, whether sealed; exit 1 if absent',
    usage: `keys:inspect ${SELECTOR_USAGE} [--show-body] [flags]`,
    flags: { ...SELECTOR_FLAGS, 'show-body': { type: 'boolean' } },
    run: onTable(inspect),
  },
  'keys:release': {
    summary:
      'remove a PENDING or FAILED record (conditioned on the claim token just read), so the key runs again; COMPLETED needs --force',
    usage: `keys:release ${SELECTOR_USAGE} [--force] [flags]`,
    flags: { ...SELECTOR_FLAGS, force: { type: 'boolean' } },
    run: onTable(release),
  },
  'keys:purge': {
    summary:
      'remove a COMPLETED record: the next request with the key runs the handler again (asks on a terminal; --yes otherwise)',
    usage: `keys:purge ${SELECTOR_USAGE} [--yes] [flags]`,
    flags: { ...SELECTOR_FLAGS, yes: { type: 'boolean' } },
    run: onTable(purge),
  },
  'keys:list': {
    summary: 'list records, one line each (a Query per scope with a sort key, else a Scan); exit 1 when none',
    usage:
      'keys:list [--status PENDING|COMPLETED|FAILED] [--older-than 90s] [--scope <scope> | --partition <value>] [flags]',
    flags: {
      status: { type: 'string' },
      'older-than': { type: 'string' },
      scope: { type: 'string' },
      partition: { type: 'string' },
    },
    run: onTable(list),
  },
} satisfies Record<string, CliCommand>;

/**
 * Runs a command once the table is the one the flags describe: a missing table, or a key schema other than the
 * layout's (`keys:list` on a PK/SK table without `--sort-key`), exits 2 naming both schemas, before anything is read.
 * Credentials that may not call DescribeTable only skip the check (said on stderr).
 */
export function onTable(run: (context: CliContext) => Promise<number>): (context: CliContext) => Promise<number> {
  return async (context) => {
    const layout = new TableLayout(context.layout);
    let problem: string | undefined;
    try {
      const { Table } = await context.client.send(new DescribeTableCommand({ TableName: context.tableName }));
      problem = keySchemaProblem(layout, Table);
      if (problem) problem += ' With this CLI: --partition-key, --sort-key and --key-prefix, or keySchema in --config.';
    } catch (error) {
      const code = dynamoErrorCode(error);
      if (code === 'AccessDeniedException') {
        context.out.error(
          "the table's key schema was not checked: these credentials may not call dynamodb:DescribeTable",
        );
      } else if (code === 'ResourceNotFoundException') {
        problem = unusableBecause(error, await locationOf(context.client, context.tableName), layout);
      }
    }
    if (problem === undefined) return asUsage(run)(context);
    context.out.error(`${context.where}: ${problem}`);
    return 2;
  };
}

/** The admin's `TypeError`s are a selector the command cannot use (no key, a key the module refuses): usage errors. */
export function asUsage(run: (context: CliContext) => Promise<number>): (context: CliContext) => Promise<number> {
  return async (context) => {
    try {
      return await run(context);
    } catch (error) {
      if (error instanceof TypeError) throw new UsageError(error.message, { cause: error });
      throw error;
    }
  };
}

export function adminOf(context: CliContext): IdempotencyAdmin {
  const layout = new TableLayout(context.layout);
  const repository = new DynamoDbIdempotencyRepository({
    client: context.client,
    tableName: context.tableName,
    ...context.layout,
  });
  return new IdempotencyAdmin({
    repository,
    keyPrefix: layout.keyPrefix,
    sortKey: !!layout.sortKey,
    partitionKeyValue: context.config.partitionKeyValue,
    sealer: sealerOf(context),
  });
}

export function selectorOf({ values }: CliContext): KeySelector {
  const text = (name: string) => (typeof values[name] === 'string' ? (values[name] as string) : undefined);
  const selector: KeySelector = {
    route: text('route'),
    key: text('key'),
    scope: text('scope'),
    version: text('version'),
    name: text('name'),
    recordKey: text('record-key'),
    partition: text('partition'),
  };
  const byKey = (selector.route || selector.name) && selector.key !== undefined;
  if (!byKey && !selector.recordKey) throw new UsageError(`a key is selected by ${SELECTOR_USAGE}`);
  return selector;
}

async function locate(context: CliContext): Promise<number> {
  const location = adminOf(context).locate(selectorOf(context));
  const itemKey = new TableLayout(context.layout).itemKey(location.key, location.partition);
  const get = `aws dynamodb get-item --table-name ${context.tableName} --consistent-read --key '${JSON.stringify(itemKey)}'`;
  context.print({ ...location, itemKey }, [
    `record key: ${location.key}`,
    ...(location.partition === undefined ? [] : [`partition: ${location.partition}`]),
    `item key: ${JSON.stringify(itemKey)}`,
    `read it: ${get}`,
  ]);
  return 0;
}

async function inspect(context: CliContext): Promise<number> {
  const report = await adminOf(context).inspect(selectorOf(context), {
    showBody: context.values['show-body'] === true,
  });
  if (!report) {
    context.print({ found: false }, ['no record for this key']);
    context.out.error(NOT_FOUND_HINT);
    return 1;
  }
  context.print(report, reportLines(report));
  return 0;
}

async function release(context: CliContext): Promise<number> {
  return printResult(
    context,
    await adminOf(context).release(selectorOf(context), { force: context.values.force === true }),
  );
}

async function purge(context: CliContext): Promise<number> {
  const selector = selectorOf(context);
  if (context.values.yes !== true) {
    if (!context.out.confirm) throw new UsageError('keys:purge needs --yes when it cannot ask (not on a terminal)');
    const question = 'Purge this COMPLETED record? The next request with its key runs the handler again. [y/N] ';
    if (!(await context.out.confirm(question))) {
      context.print({ done: false, reason: 'declined' }, ['nothing was done']);
      return 1;
    }
  }
  return printResult(context, await adminOf(context).purge(selector));
}

async function list(context: CliContext): Promise<number> {
  const status = context.values.status as string | undefined;
  if (status !== undefined && !['PENDING', 'COMPLETED', 'FAILED'].includes(status)) {
    throw new UsageError(`--status is PENDING, COMPLETED or FAILED, got ${status}`);
  }
  const olderThan = context.values['older-than'];
  const filter = {
    status: status as IdempotencyStatus | undefined,
    olderThanSeconds: typeof olderThan === 'string' ? durationSeconds(olderThan, '--older-than') : 0,
    scope: context.values.scope as string | undefined,
    partition: context.values.partition as string | undefined,
  };
  if (filter.partition === undefined && filter.scope === undefined) await sayListingCost(context);
  const records: RecordReport[] = [];
  for await (const record of adminOf(context).list(filter)) records.push(record);
  context.print(
    records,
    records.map(
      (record) =>
        `${record.status.padEnd(9)} ${record.key}${record.partition ? `  partition ${record.partition}` : ''}  since ${record.pendingSince}  expires ${record.expiresAt}`,
    ),
  );
  if (records.length === 0) context.out.error('no records');
  return records.length > 0 ? 0 : 1;
}

/**
 * Before a listing of the whole table of a table without the index of keys in flight, on stderr: it reads every item
 * (their count and size, the read units, and the command that adds the index). With the index, PENDING records come
 * from it; other listings read the table, as asked.
 */
async function sayListingCost(context: CliContext): Promise<void> {
  const cost = await new DynamoDbIdempotencyRepository({
    client: context.client,
    tableName: context.tableName,
    ...context.layout,
  })
    .inFlightCost()
    .catch(() => undefined);
  if (!cost || cost.indexed) return;
  context.out.error(scanCostInWords(cost, LISTING_ITEMS_PER_SECOND).text.replace('a sweep', 'this listing'));
  if (cost.addIndex) context.out.error(`add the index: ${cost.addIndex}`);
}

/** About how many items a listing reads a second (pages of 100, one after another): for the estimate only. */
const LISTING_ITEMS_PER_SECOND = 1000;

export function printResult(context: CliContext, result: AdminResult): number {
  context.print(result, [result.note, ...(result.record ? reportLines(result.record) : [])]);
  if (!result.done && result.reason === 'not_found') context.out.error(NOT_FOUND_HINT);
  return result.done ? 0 : 1;
}

export function reportLines(report: RecordReport): string[] {
  return [
    `record key: ${report.key}`,
    ...(report.partition === undefined ? [] : [`partition: ${report.partition}`]),
    `status: ${report.status}`,
    `pending since: ${report.pendingSince}`,
    `expires at: ${report.expiresAt} (${report.expiresInSeconds >= 0 ? `in ${report.expiresInSeconds} s` : `${-report.expiresInSeconds} s ago`})`,
    ...(report.completedAt ? [`completed at: ${report.completedAt}`] : []),
    `fingerprint: ${report.fingerprint}`,
    `claim token: ${report.claimToken}`,
    ...(report.holder === undefined ? [] : [`holder: ${report.holder}`]),
    ...(report.renewedAt === undefined ? [] : [`last renewed: ${report.renewedAt}`]),
    ...(report.owner === undefined ? [] : [`owner: ${report.owner}`]),
    ...(report.owners === undefined ? [] : [`owners since its last clean end: ${report.owners.join(', ') || 'none'}`]),
    ...(report.poisoned === undefined ? [] : [`poisoned: ${report.poisoned}`]),
    ...(report.stepOutcomeUnknown === undefined ? [] : [`step outcome unknown: ${report.stepOutcomeUnknown}`]),
    ...(report.handlerVersion === undefined ? [] : [`handler version: ${report.handlerVersion}`]),
    ...(report.storedStatus === undefined ? [] : [`stored status: ${report.storedStatus}`]),
    ...(report.storedBytes === undefined
      ? []
      : [`stored size: ${report.storedBytes} bytes`, `sealed: ${report.sealed ? 'yes (encryption)' : 'no'}`]),
    ...(report.body === undefined ? [] : [`body: ${JSON.stringify(report.body)}`]),
    ...(report.steps ?? []).map(
      ({ name, recordedAt, attempt, bytes, result }) =>
        `step ${JSON.stringify(name)}: recorded at ${recordedAt}, attempt ${attempt}, ${bytes ?? '?'} bytes` +
        (result === undefined ? '' : `, result: ${JSON.stringify(result)}`),
    ),
    ...(report.startedSteps ?? []).map(
      ({ name, startedAt, attempt }) =>
        `step ${JSON.stringify(name)}: started at ${startedAt}, attempt ${attempt}, not recorded (at most once: outcome unknown)`,
    ),
  ];
}
