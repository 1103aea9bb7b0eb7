import { TableDescription } from '@aws-sdk/client-dynamodb';
import { Logger } from '@nestjs/common';

/**
 * A table's multi-Region mode, from `DescribeTable`: `STRONG` for a multi-Region strongly consistent (MRSC) global
 * table, `EVENTUAL` for a global table of the default mode (MREC), undefined for a table of one Region.
 */
export type MultiRegionMode = 'STRONG' | 'EVENTUAL' | undefined;

export function multiRegionMode(table: TableDescription | undefined): MultiRegionMode {
  if (table?.MultiRegionConsistency === 'STRONG') return 'STRONG';
  if (table?.MultiRegionConsistency === 'EVENTUAL' || (table?.Replicas?.length ?? 0) > 0) return 'EVENTUAL';
  return undefined;
}

/**
 * Why `commitWith` is unavailable on an MRSC table. AWS's "How DynamoDB global tables work": MRSC global tables do not
 * support transaction operations (they answer an error), nor TTL.
 */
export const MRSC_WITHOUT_TRANSACTIONS =
  'a multi-Region strongly consistent (MRSC) global table has no transactions (TransactWriteItems answers an error there)';

/** What changes on a global table, said once at startup: one line per consequence, for a warning. */
export function globalTableNotes(tableName: string, mode: MultiRegionMode): string[] {
  if (mode === 'STRONG') {
    return [
      `Idempotency table "${tableName}" is a multi-Region strongly consistent (MRSC) global table: claims are checked ` +
        'across Regions (a racing write answers ReplicatedWriteConflictException: 409 in flight, never a second run).',
      `commitWith is unavailable: ${MRSC_WITHOUT_TRANSACTIONS}. canCommitWith is false; a handler that calls ` +
        'commitWith gets an error before anything is written. Write those effects in the handler with conditions, or ' +
        'use a table of one Region (or MREC) for routes that need them.',
      'TTL is unavailable on MRSC tables, so nothing deletes expired records: the reconciler deletes them instead. Run ' +
        'it (reconcileIntervalSeconds in one process, or `npx nestjs-dynamodb-idempotency reconcile` on a schedule).',
    ];
  }
  if (mode === 'EVENTUAL') {
    return [
      `Idempotency table "${tableName}" is a global table with multi-Region eventual consistency (MREC): a conditional ` +
        'write is checked only in its own Region, so two claims of one key in two Regions at once can both win and ' +
        'the handler runs twice. Route each key to one Region, or use an MRSC table (docs/global-tables.md).',
    ];
  }
  return [];
}

/**
 * The table's multi-Region mode, described once: by the startup check, or at the first question when the startup check
 * is off (no mode when that description fails). Either way, what a global table changes is said once, as a warning.
 */
export class TableModeProbe {
  private described?: Promise<MultiRegionMode>;

  constructor(
    private readonly tableName: string,
    private readonly describe: () => Promise<{ problem?: string; mode?: MultiRegionMode }>,
  ) {}

  /** Throws what makes the table unusable; warns once of what its multi-Region mode changes. */
  async checkReady(): Promise<void> {
    const { problem, mode } = await this.describe();
    if (problem) throw new Error(problem);
    this.described = Promise.resolve(mode);
    this.warn(mode);
  }

  /**
   * Whether the table has transactions: never on an MRSC table; elsewhere as `probe` finds. Before the table has been
   * described (no startup check), the description and the probe are sent together: one round trip's wait.
   */
  async hasTransactions(probe: () => Promise<boolean>): Promise<boolean> {
    if (this.described) return (await this.described) !== 'STRONG' && probe();
    const [mode, transactions] = await Promise.all([this.mode(), probe()]);
    return mode !== 'STRONG' && transactions;
  }

  mode(): Promise<MultiRegionMode> {
    this.described ??= this.describe().then(
      ({ mode }) => {
        this.warn(mode);
        return mode;
      },
      () => undefined,
    );
    return this.described;
  }

  private warn(mode: MultiRegionMode): void {
    for (const note of globalTableNotes(this.tableName, mode)) logger.warn(note);
  }
}

const logger = new Logger('Idempotency');
