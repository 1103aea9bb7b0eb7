import { BenchStepsController } from './bench/bench-steps.controller';
import { OrderTools } from './orders/order-tools';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamicModule, Global, Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { IdempotencyModule, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { BenchController, ContextUser } from './bench/bench.controller';
import { CheckoutController, PaymentsLink } from './checkout/checkout.controller';
import { PaymentProviderController, ReceiptController } from './checkout/payment-provider.controller';
import { PurchaseController } from './checkout/purchase.controller';
import { ORDERS_API_CONFIG, OrdersApiConfig } from './config';
import { HealthController } from './health/health.controller';
import { MetricsController } from './metrics/metrics.controller';
import { OrdersController } from './orders/orders.controller';
import { OrdersRepository } from './orders/orders.repository';
import { PaymentsConsumer } from './payments/payments.consumer';

/** The configuration and the one DynamoDB client, shared by the app and the idempotency module. */
@Global()
@Module({})
export class InfrastructureModule {
  static forRoot(config: OrdersApiConfig, client: DynamoDBClient): DynamicModule {
    return {
      module: InfrastructureModule,
      providers: [
        { provide: ORDERS_API_CONFIG, useValue: config },
        { provide: DynamoDBClient, useValue: client },
      ],
      exports: [ORDERS_API_CONFIG, DynamoDBClient],
    };
  }
}

@Module({})
export class AppModule {
  static forRoot(config: OrdersApiConfig, client: DynamoDBClient): DynamicModule {
    return {
      module: AppModule,
      imports: [
        InfrastructureModule.forRoot(config, client),
        TerminusModule,
        IdempotencyModule.forRootAsync({
          inject: [ORDERS_API_CONFIG, DynamoDBClient],
          useFactory: (settings: OrdersApiConfig, dynamo: DynamoDBClient) => ({
            client: dynamo,
            tableName: settings.idempotencyTable,
            ...settings.idempotencyLayout,
            ttlSeconds: settings.idempotencyTtlSeconds,
            pendingTtlSeconds: settings.idempotencyPendingTtlSeconds,
            reconcileIntervalSeconds: settings.reconcileIntervalSeconds,
            replayCache: { enabled: settings.replayCache },
            startupCheck: settings.startupCheck,
            unkeyedCalls: settings.unkeyedCalls,
            repository: settings.idempotencyStore === 'memory' ? new InMemoryIdempotencyRepository() : undefined,
          }),
        }),
      ],
      // The benchmark's app is one that uses @Idempotent() only, as most do: the orders (whose repository injects
      // IdempotencyContext, and so turns on call tracking) are left out.
      controllers: config.benchRoutes
        ? [HealthController, MetricsController, BenchController, ...(config.benchSteps ? [BenchStepsController] : [])]
        : [
            OrdersController,
            CheckoutController,
            PurchaseController,
            PaymentProviderController,
            ReceiptController,
            HealthController,
            MetricsController,
            PaymentsConsumer,
            OrderTools,
          ],
      providers: config.benchRoutes ? (config.benchTrackCalls ? [ContextUser] : []) : [OrdersRepository, PaymentsLink],
    };
  }
}
