import { OrdersApiConfig } from '../config';
import { Order } from './order';

/** The prefix of an order's keys in a table it shares with the idempotency records. */
const ORDER_PREFIX = 'ORDER#';

/**
 * How an order is stored. In a table of its own, as itself, keyed by `id`. In the idempotency table (single-table
 * design: ORDERS_TABLE = IDEMPOTENCY_TABLE), under that table's keys, `ORDER#<id>` in each, with `entity: 'order'`, so
 * that listings (and the module's own reads, which look only at its prefix and claim tokens) tell the two apart.
 */
export class OrderItems {
  readonly tableName: string;
  private readonly keys: string[];
  private readonly shared: boolean;

  constructor(config: OrdersApiConfig) {
    this.tableName = config.ordersTable;
    this.shared = config.ordersTable === config.idempotencyTable;
    const { partitionKey = 'pk', sortKey } = config.idempotencyLayout.keySchema ?? {};
    this.keys = this.shared ? [partitionKey, ...(sortKey ? [sortKey] : [])] : ['id'];
  }

  key(id: string): Record<string, string> {
    const value = this.shared ? `${ORDER_PREFIX}${id}` : id;
    return Object.fromEntries(this.keys.map((name) => [name, value]));
  }

  /** The order's item; `idempotencyKey`, the key it was placed under, is stored beside it (`GET /orders?key=`). */
  item(order: Order, idempotencyKey?: string): Record<string, unknown> {
    const key = idempotencyKey === undefined ? {} : { idempotencyKey };
    return this.shared ? { ...this.key(order.id), entity: 'order', ...order, ...key } : { ...order, ...key };
  }

  order(item: Record<string, unknown>): Order {
    const { entity: _entity, idempotencyKey: _key, ...fields } = item;
    if (this.shared) for (const name of this.keys) delete fields[name];
    return fields as unknown as Order;
  }

  /** `attribute_exists` / `attribute_not_exists` of the order's partition key. */
  condition(exists: boolean): { ConditionExpression: string; ExpressionAttributeNames: Record<string, string> } {
    const test = exists ? 'attribute_exists' : 'attribute_not_exists';
    return { ConditionExpression: `${test}(#key)`, ExpressionAttributeNames: { '#key': this.keys[0] } };
  }

  /** A shared table holds more than orders: a listing reads the orders only (a Scan's filter: it still reads all). */
  listFilter(idempotencyKey?: string): {
    FilterExpression?: string;
    ExpressionAttributeValues?: Record<string, unknown>;
  } {
    const tests = [
      ...(this.shared ? ['entity = :order'] : []),
      ...(idempotencyKey === undefined ? [] : ['idempotencyKey = :key']),
    ];
    if (tests.length === 0) return {};
    return {
      FilterExpression: tests.join(' AND '),
      ExpressionAttributeValues: {
        ...(this.shared ? { ':order': 'order' } : {}),
        ...(idempotencyKey === undefined ? {} : { ':key': idempotencyKey }),
      },
    };
  }
}
