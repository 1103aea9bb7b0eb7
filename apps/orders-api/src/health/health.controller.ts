import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Controller, Get, Inject } from '@nestjs/common';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { IdempotencyHealthIndicator } from 'nestjs-dynamodb-idempotency';
import { ORDERS_API_CONFIG, OrdersApiConfig } from '../config';

@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly idempotency: IdempotencyHealthIndicator,
    private readonly client: DynamoDBClient,
    @Inject(ORDERS_API_CONFIG) private readonly config: OrdersApiConfig,
  ) {}

  /** 200 once the idempotency store answers and the orders table is ACTIVE; 503 otherwise. */
  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.idempotency.isHealthy('idempotency_store'), () => this.ordersTable()]);
  }

  private async ordersTable() {
    const indicator = this.indicators.check('orders_table');
    try {
      const { Table } = await this.client.send(new DescribeTableCommand({ TableName: this.config.ordersTable }));
      return Table?.TableStatus === 'ACTIVE' ? indicator.up() : indicator.down({ tableStatus: Table?.TableStatus });
    } catch (error) {
      return indicator.down({ dynamo_error_code: (error as Error).name });
    }
  }
}
