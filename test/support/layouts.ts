import { TableLayoutOptions } from 'nestjs-dynamodb-idempotency';

/**
 * The table layouts the layout-dependent suites run on: the default (`pk` alone), and a single-table layout as teams
 * have them: generic PK/SK keys, a prefix marking the module's items, every record attribute renamed.
 */
export const LAYOUTS = {
  default: {} as TableLayoutOptions,
  'single-table': {
    keySchema: { partitionKey: 'PK', sortKey: 'SK' },
    keyPrefix: 'IDEMPOTENCY#',
    attributeNames: {
      status: 'st',
      expires_at: 'ttl',
      claim_token: 'owner',
      fingerprint: 'fp',
      response: 'data',
      pending_since: 'since',
      completed_at: 'done',
      steps: 'journal',
      runs: 'claims',
    },
  } as TableLayoutOptions,
};

export type LayoutName = keyof typeof LAYOUTS;

const ATTRIBUTES = [
  'status',
  'expires_at',
  'claim_token',
  'fingerprint',
  'response',
  'pending_since',
  'completed_at',
  'steps',
  'runs',
] as const;

/**
 * An item of the module as the default layout names it, whatever the layout: `pk` is the record key (the sort key
 * without its prefix in a sort-key layout), `partition` the partition key's value there, and every record attribute
 * under its default name. Undefined for an item that is not the module's (another entity of a shared table).
 */
export function asDefaultLayout<T>(item: Record<string, T>, layout: TableLayoutOptions): Record<string, T> | undefined {
  const prefix = layout.keyPrefix ?? '';
  const partitionKey = layout.keySchema?.partitionKey ?? 'pk';
  const sortKey = layout.keySchema?.sortKey;
  const keyValue = item[sortKey ?? partitionKey] as unknown;
  const keyText = typeof keyValue === 'string' ? keyValue : (keyValue as { S?: string } | undefined)?.S;
  if (
    keyText === undefined ||
    !keyText.startsWith(prefix) ||
    item[layout.attributeNames?.claim_token ?? 'claim_token'] === undefined
  ) {
    return undefined;
  }
  const named: Record<string, T> = {};
  for (const name of ATTRIBUTES) {
    const stored = item[layout.attributeNames?.[name] ?? name];
    if (stored !== undefined) named[name] = stored;
  }
  const recordKey = keyText.slice(prefix.length);
  const pk = (typeof keyValue === 'string' ? recordKey : { S: recordKey }) as T;
  return { ...named, pk, ...(sortKey ? { partition: item[partitionKey] } : {}) };
}
