import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Controller, Get, Inject, ServiceUnavailableException } from '@nestjs/common';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';

@Controller('health')
export class HealthController {
  constructor(
    private readonly client: DynamoDBClient,
    @Inject(ORDERS_API_CONFIG) private readonly config: OrdersApiConfig,
  ) {}

  /** 200 once both tables are ACTIVE, 503 otherwise. */
  @Get()
  async check(): Promise<{ status: 'ok'; tables: Record<string, string> }> {
    const tables: Record<string, string> = {};
    for (const name of [this.config.idempotencyTable, this.config.ordersTable]) {
      try {
        const { Table } = await this.client.send(new DescribeTableCommand({ TableName: name }));
        tables[name] = Table?.TableStatus ?? 'UNKNOWN';
      } catch (error) {
        tables[name] = (error as Error).name;
      }
    }
    if (Object.values(tables).some((status) => status !== 'ACTIVE')) {
      throw new ServiceUnavailableException({ status: 'unavailable', tables });
    }
    return { status: 'ok', tables };
  }
}
