/** What reading records asks for and costs: a scan (or one partition's Query), and the keys in flight. */

export interface ScanInput {
  /** Records per page (one DynamoDB Scan request). */
  pageSize: number;
  /** Only the records of this partition (a sort-key layout: one DynamoDB Query instead of a Scan). */
  partition?: string;
  /** Only one segment of a parallel scan (`index` of `total`): a sample of the table (the reconciler's TTL canary). */
  segment?: { index: number; total: number };
  /** At most this many pages (a sample's size); all by default. */
  maxPages?: number;
}

/** Reading the keys in flight (the PENDING records): a sweep's and a PENDING listing's. */
export interface InFlightInput {
  /** Records per page. */
  pageSize: number;
  /** Only leases that ended before this (epoch seconds): a sweep asks for those past their end and the skew margin. */
  leaseEndedBefore?: number;
}

/**
 * What reading the keys in flight reads in this store: its index of keys in flight (`indexed`: the records in flight and
 * nothing else), or every record (a scan); the table's item count and size when the store knows them, and how to add
 * the index when it has none.
 */
export interface InFlightCost {
  /** Whether the keys in flight are read from an index (a cost of the keys in flight) or a scan (of the table). */
  indexed: boolean;
  /** The index read, when `indexed`. */
  index?: string;
  /** The table's item count as DynamoDB describes it (updated about every six hours), when it was described. */
  itemCount?: number;
  /** The table's size in bytes as DynamoDB describes it, when it was described. */
  sizeBytes?: number;
  /** The command that adds the index, when there is none. */
  addIndex?: string;
  /** Why the table could not be described (the error's code): whether it has the index is not known, so it is scanned. */
  undescribed?: string;
}
