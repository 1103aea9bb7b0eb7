import { randomInt } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { InFlightCost } from '../repository/idempotency.repository';

/** What a sweep reads, in a sentence, and whether it is said as a warning. */
export interface ScanCostStatement {
  text: string;
  /** It cannot finish within its interval, or the table could not be described. */
  warn: boolean;
}

/**
 * What a sweep of a table without the index of keys in flight reads: every item (DynamoDB bills a Scan by the size of
 * the items it reads, half a read unit per 4 KB), and how long it takes at `itemsPerSecond`; a warning when that is longer
 * than `intervalSeconds`.
 */
export function scanCostInWords(
  cost: InFlightCost,
  itemsPerSecond: number,
  intervalSeconds?: number,
): ScanCostStatement {
  const { itemCount, sizeBytes } = cost;
  if (cost.undescribed) {
    return {
      text:
        `the table could not be described (${cost.undescribed}): a sweep cannot tell whether it has the index of keys ` +
        'in flight, and reads every item. Grant dynamodb:DescribeTable (docs/operating.md#iam).',
      warn: true,
    };
  }
  const fix = cost.addIndex ? ' Add the index (add_index; docs/scaling.md).' : '';
  // DynamoDB counts a table's items about every 6 hours: 0 is "not counted yet" as often as an empty table.
  if (!itemCount) {
    return { text: `no index of keys in flight: a sweep reads every item of the table.${fix}`, warn: false };
  }
  const seconds = Math.ceil(itemCount / itemsPerSecond);
  const readUnits = Math.ceil((sizeBytes ?? 0) / 4096 / 2);
  const megabytes = ((sizeBytes ?? 0) / 1_000_000).toFixed(1);
  const late = intervalSeconds !== undefined && seconds > intervalSeconds;
  const lateness = late
    ? `, longer than its interval (${intervalSeconds} s): it cannot finish before the next, and the stuck-PENDING alert cannot hold`
    : '';
  return {
    text:
      `no index of keys in flight: a sweep reads all ${itemCount} items of the table (${megabytes} MB, about ` +
      `${readUnits} read units) in about ${seconds} s at ${itemsPerSecond} items a second${lateness}.${fix}`,
    warn: late,
  };
}

/** `count` distinct segments of a parallel scan of `total` segments, chosen at random (a sample of the table). */
export function sampleOf(total: number, count: number): { index: number; total: number }[] {
  const chosen = new Set<number>();
  while (chosen.size < Math.min(count, total)) chosen.add(randomInt(total));
  return [...chosen].map((index) => ({ index, total }));
}

/** Paces pages at `maxPagesPerSecond`: each call waits what is left of the page's share of a second. */
export function pacer(maxPagesPerSecond: number): () => Promise<void> {
  const pageIntervalMs = 1000 / maxPagesPerSecond;
  let pageStarted = performance.now();
  return async () => {
    await sleep(Math.max(0, pageIntervalMs - (performance.now() - pageStarted)));
    pageStarted = performance.now();
  };
}
