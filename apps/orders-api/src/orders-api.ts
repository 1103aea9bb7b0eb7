import { McpStrategy, StreamableHttpTransport } from '@rekog/mcp-nest';
import { AddressInfo, Server } from 'node:net';
import { INestApplication, Logger } from '@nestjs/common';
import { MicroserviceOptions, Transport } from '@nestjs/microservices';
import { HttpAdapterHost, NestFactory } from '@nestjs/core';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ensureIdempotencyTable, ensureTable, IdempotencyService } from 'nestjs-dynamodb-idempotency';
import { AppModule } from './app.module';
import { PaymentsLink } from './checkout/checkout.controller';
import { LOG_LEVELS, OrdersApiConfig } from './config';
import { ProblemDetailsFilter } from './problem-details.filter';
import { createDynamoClient, resolveEndpoint } from './dynamodb';
import { POWERTOOLS_TABLE } from './bench/bench.controller';
import { countDynamoCalls } from './bench/call-counter';
import { registerPrometheusMetrics } from './metrics/prometheus';

export interface RunningOrdersApi {
  app: INestApplication;
  url: string;
  /** Where the TCP microservice (the payments consumer) listens. */
  microservice: { host: string; port: number };
  close(): Promise<void>;
}

/** Starts the demo: DynamoDB endpoint (embedded if none), tables, then the HTTP listener. */
export async function startOrdersApi(
  config: OrdersApiConfig,
  options: { logger?: false } = {},
): Promise<RunningOrdersApi> {
  registerPrometheusMetrics();
  const logger = new Logger('OrdersApi');
  const dynamo = await resolveEndpoint(config);
  if (dynamo.embedded) {
    logger.log(
      `DYNAMODB_ENDPOINT is not set: started an embedded dynalite at ${dynamo.endpoint} (in memory, gone on exit)`,
    );
  } else {
    logger.log(`Using DynamoDB at ${dynamo.endpoint}`);
  }
  const client = createDynamoClient(config, dynamo.endpoint);
  if (config.benchRoutes) countDynamoCalls(client);
  if (config.createTables) await createTables(config, client);
  const adapter = config.platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
  const levels = options.logger ?? [...LOG_LEVELS.slice(LOG_LEVELS.indexOf(config.logLevel))];
  const app = await NestFactory.create(AppModule.forRoot(config, client), adapter, { logger: levels });
  app.useGlobalFilters(new ProblemDetailsFilter(app.get(HttpAdapterHost).httpAdapter));
  // A browser client reads only the response headers CORS exposes: the replay marker, the retry delay, the order's URL.
  app.enableCors({ exposedHeaders: ['Idempotent-Replayed', 'Retry-After', 'Location'] });
  // The API's OpenAPI document: the module describes its @Idempotent() routes (key header, problems, x-idempotency).
  const openApi = new DocumentBuilder().setTitle('orders-api').setVersion('1').build();
  SwaggerModule.setup('docs', app, () => SwaggerModule.createDocument(app, openApi), { jsonDocumentUrl: 'docs-json' });
  app.enableShutdownHooks();
  const transport = app.connectMicroservice<MicroserviceOptions>({
    transport: Transport.TCP,
    options: { host: '127.0.0.1', port: config.microservicePort },
  });
  // The orders as an MCP tool (Streamable HTTP at /mcp), for agents.
  if (!config.benchRoutes) {
    const mcp = new McpStrategy({ name: 'orders-api', version: '1.0.0', transports: [new StreamableHttpTransport()] });
    mcp.setHttpAdapter(app.getHttpAdapter());
    app.connectMicroservice({ strategy: mcp });
  }
  await app.startAllMicroservices();
  // Port 0 lets the system pick a free port; the one it picked is read back, never guessed beforehand.
  const microservice = { host: '127.0.0.1', port: (transport.unwrap<Server>().address() as AddressInfo).port };
  // Fastify listens on 127.0.0.1 unless told otherwise; Express on every interface.
  await (config.platform === 'fastify' ? app.listen(config.port, '0.0.0.0') : app.listen(config.port));
  const transactions =
    config.idempotencyStore === 'dynamodb' &&
    (await app
      .get(IdempotencyService)
      .commitSupported()
      .catch(() => false));
  logger.log(
    transactions
      ? 'POST /orders commits each order with its idempotency key in one transaction (TransactWriteItems)'
      : 'POST /orders writes each order itself (no transactions on this store, e.g. dynalite): the order and its key are two writes',
  );
  const url = (await app.getUrl()).replace('[::1]', 'localhost').replace('127.0.0.1', 'localhost');
  // The checkout's payment provider, unless PAYMENTS_URL names another: this app, on the address it listens on.
  if (!config.benchRoutes) app.get(PaymentsLink).ownUrl = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return {
    app,
    url,
    microservice,
    close: async () => {
      await app.close();
      client.destroy();
      await dynamo.close();
    },
  };
}

/** The tables, created if missing (TTL enabled on the idempotency table's expiry attribute); CREATE_TABLES=0 skips it. */
async function createTables(config: OrdersApiConfig, client: ReturnType<typeof createDynamoClient>): Promise<void> {
  await ensureIdempotencyTable(client, { tableName: config.idempotencyTable, ...config.idempotencyLayout });
  const tableWithId = (TableName: string) => ({
    TableName,
    AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' as const }],
    KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' as const }],
    BillingMode: 'PAY_PER_REQUEST' as const,
  });
  // Single-table: the orders live beside the idempotency records, under that table's keys.
  if (config.ordersTable !== config.idempotencyTable) await ensureTable(client, tableWithId(config.ordersTable));
  if (config.benchRoutes) await ensureTable(client, tableWithId(POWERTOOLS_TABLE));
}
