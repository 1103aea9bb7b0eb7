import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand, ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { Inject, Injectable, ServiceUnavailableException } from '@nestjs/common';
import { IdempotencyContext } from 'nestjs-dynamodb-idempotency';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';
import { Order } from './order';
import { OrderItems } from './order-items';

/** The orders: in a table of their own (`id` as the hash key) or beside the idempotency records (see OrderItems). */
@Injectable()
export class OrdersRepository {
  private readonly documents: DynamoDBDocumentClient;
  private readonly items: OrderItems;
  /** The in-memory idempotency store (IDEMPOTENCY_STORE=memory) records commitWith writes without applying them. */
  private readonly commitsWithKey: boolean;

  constructor(
    client: DynamoDBClient,
    @Inject(ORDERS_API_CONFIG) config: OrdersApiConfig,
    private readonly idempotency: IdempotencyContext,
  ) {
    this.documents = DynamoDBDocumentClient.from(client);
    this.items = new OrderItems(config);
    this.commitsWithKey = config.idempotencyStore === 'dynamodb';
  }

  /**
   * Inside an idempotent call on a store with transactions, the order is committed with the key's completion:
   * it exists if and only if the key is COMPLETED, whatever crashes. Otherwise (the embedded dynalite has no
   * transactions) it is written now.
   */
  async put(order: Order, idempotencyKey?: string): Promise<void> {
    const put = {
      TableName: this.items.tableName,
      Item: this.items.item(order, idempotencyKey),
      ...this.items.condition(false),
    };
    if (this.commitsWithKey && this.idempotency.canCommitWith) return this.idempotency.commitWith({ Put: put });
    await this.send(new PutCommand(put));
  }

  /** Adds a payment to an existing order; fails for an unknown one. */
  async recordPayment(id: string, amount: number): Promise<void> {
    await this.send(
      new UpdateCommand({
        TableName: this.items.tableName,
        Key: this.items.key(id),
        UpdateExpression: 'SET paidAt = :now ADD payments :one, paidTotal :amount',
        ...this.items.condition(true),
        ExpressionAttributeValues: { ':now': new Date().toISOString(), ':one': 1, ':amount': amount },
      }),
    );
  }

  async get(id: string): Promise<Order | undefined> {
    const { Item } = await this.send(
      new GetCommand({ TableName: this.items.tableName, Key: this.items.key(id), ConsistentRead: true }),
    );
    return Item && this.items.order(Item);
  }

  /** Every order, or (`idempotencyKey`) those placed under that key: a Scan, as the demo's listing is. */
  async all(idempotencyKey?: string): Promise<Order[]> {
    const orders: Order[] = [];
    let ExclusiveStartKey: Record<string, unknown> | undefined;
    do {
      const page = await this.send(
        new ScanCommand({
          TableName: this.items.tableName,
          ConsistentRead: true,
          ExclusiveStartKey,
          ...this.items.listFilter(idempotencyKey),
        }),
      );
      orders.push(...(page.Items ?? []).map((item) => this.items.order(item)));
      ExclusiveStartKey = page.LastEvaluatedKey;
    } while (ExclusiveStartKey);
    return orders.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  /**
   * The orders table failing (throttled, unreachable) is a 503 for the client, not a 500: nothing was written, and
   * the idempotency key is released, so the same request can be retried.
   */
  private async send(command: PutCommand | UpdateCommand | GetCommand | ScanCommand): Promise<{
    Item?: Record<string, unknown>;
    Items?: Record<string, unknown>[];
    LastEvaluatedKey?: Record<string, unknown>;
  }> {
    try {
      // One call site for every command type; the output fields used are Item, Items and LastEvaluatedKey.
      return await this.documents.send(command as ScanCommand & GetCommand);
    } catch (error) {
      if ((error as Error).name === 'ConditionalCheckFailedException') throw error;
      throw new ServiceUnavailableException(
        `The orders table is unavailable (${(error as Error).name}); retry later.`,
        {
          cause: error,
        },
      );
    }
  }
}
