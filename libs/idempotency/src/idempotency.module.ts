import { OutcomeDoorInterceptor, OutcomeDoors } from './contexts/outcome-door.interceptor';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { IdempotencyAdmin } from './admin/idempotency-admin';
import { CallDescriber } from './contexts/call-describer';
import { GraphqlContextAdapter } from './contexts/graphql.context';
import { McpContextAdapter } from './contexts/mcp.context';
import { OneTimeTokens } from './protocol/one-time-tokens';
import { HandlerProbeInstaller } from './contexts/handler-probe.installer';
import { HttpContextAdapter } from './contexts/http.context';
import { IdempotentMethodCalls } from './contexts/idempotent-method-calls';
import { MethodContextAdapter } from './contexts/method.context';
import { RpcContextAdapter } from './contexts/rpc.context';
import { IdempotencyContext } from './protocol/idempotency-context';
import { IdempotencyClock, SystemClock } from './idempotency.clock';
import { IdempotencyExceptionFilter } from './contexts/idempotency-exception.filter';
import { IdempotencyHealthIndicator } from './observability/idempotency.health';
import { IdempotencyInterceptor } from './contexts/idempotency.interceptor';
import { IdempotencyReconciler } from './observability/idempotency.reconciler';
import { IdempotencyService } from './protocol/idempotency.service';
import { IdempotentRoutesCheck } from './startup/idempotent-routes.check';
import { OpenApiRoutes } from './openapi/openapi-routes';
import { IdempotencyTelemetry } from './observability/idempotency.telemetry';
import { ConfigurableIdempotencyModule, IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition';
import { IdempotencyModuleOptions } from './options/idempotency.options';
import { RESOLVED_IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions, resolveOptions } from './options/resolved-options';
import { DynamoDbIdempotencyRepository } from './dynamodb/dynamodb-idempotency.repository';
import { IdempotencyRepository } from './repository/idempotency.repository';
import { CallTracking } from './protocol/call-tracking';
import { StoreReadiness } from './startup/store-readiness';
import { watchUnkeyedWrites } from './unkeyed-calls/dynamodb-writes';

/** The module's client, watched for writes protected calls send without a condition unless `unkeyedCalls` is off. */
function watchedClient(client: DynamoDBClient, options: ResolvedIdempotencyOptions): DynamoDBClient {
  if (options.unkeyedCalls !== 'off') watchUnkeyedWrites(client);
  return client;
}

/**
 * Idempotent controller methods on DynamoDB. Global by default (`isGlobal: false` to import it per module).
 *
 * @example
 * ```ts
 * @Module({
 *   imports: [IdempotencyModule.forRoot({ tableName: 'idempotency_keys', clientConfig: { region: 'eu-west-1' } })],
 * })
 * export class AppModule {}
 * ```
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: RESOLVED_IDEMPOTENCY_OPTIONS, inject: [IDEMPOTENCY_MODULE_OPTIONS], useFactory: resolveOptions },
    { provide: IdempotencyClock, useClass: SystemClock },
    {
      provide: IdempotencyTelemetry,
      inject: [RESOLVED_IDEMPOTENCY_OPTIONS],
      useFactory: (options: ResolvedIdempotencyOptions) => new IdempotencyTelemetry(options.tableName),
    },
    {
      provide: IdempotencyRepository,
      inject: [IDEMPOTENCY_MODULE_OPTIONS, RESOLVED_IDEMPOTENCY_OPTIONS, IdempotencyClock, IdempotencyTelemetry],
      useFactory: (
        options: IdempotencyModuleOptions,
        resolved: ResolvedIdempotencyOptions,
        clock: IdempotencyClock,
        telemetry: IdempotencyTelemetry,
      ) =>
        options.repository ??
        new DynamoDbIdempotencyRepository({
          client: watchedClient(options.client ?? new DynamoDBClient(options.clientConfig ?? {}), resolved),
          tableName: resolved.tableName,
          keySchema: options.keySchema,
          attributeNames: options.attributeNames,
          keyPrefix: options.keyPrefix,
          inFlightIndex: options.inFlightIndex,
          clock,
          telemetry,
        }),
    },
    {
      provide: IdempotencyAdmin,
      inject: [IdempotencyRepository, RESOLVED_IDEMPOTENCY_OPTIONS, IdempotencyClock, IdempotencyService],
      useFactory: (
        repository: IdempotencyRepository,
        resolved: ResolvedIdempotencyOptions,
        clock: IdempotencyClock,
        service: IdempotencyService,
      ) =>
        new IdempotencyAdmin({
          repository,
          keyPrefix: resolved.layout.keyPrefix,
          sortKey: resolved.layout.sortKey !== undefined,
          clock,
          sealer: resolved.sealer,
          partitionKeyValue: typeof resolved.partitionKeyValue === 'string' ? resolved.partitionKeyValue : undefined,
          // A removal takes effect in this process at once: its cached answer is forgotten.
          onRemoved: ({ key }) => service.forget(key),
        }),
    },
    IdempotencyContext,
    OneTimeTokens,
    CallTracking,
    StoreReadiness,
    IdempotencyService,
    IdempotencyInterceptor,
    IdempotencyExceptionFilter,
    IdempotencyReconciler,
    IdempotencyHealthIndicator,
    IdempotentRoutesCheck,
    OutcomeDoors,
    OutcomeDoorInterceptor,
    OpenApiRoutes,
    HttpContextAdapter,
    RpcContextAdapter,
    GraphqlContextAdapter,
    McpContextAdapter,
    MethodContextAdapter,
    IdempotentMethodCalls,
    HandlerProbeInstaller,
    CallDescriber,
  ],
  exports: [
    IDEMPOTENCY_MODULE_OPTIONS,
    RESOLVED_IDEMPOTENCY_OPTIONS,
    IdempotencyClock,
    IdempotencyTelemetry,
    IdempotencyRepository,
    IdempotencyContext,
    OneTimeTokens,
    IdempotencyService,
    IdempotencyInterceptor,
    IdempotencyExceptionFilter,
    IdempotencyReconciler,
    IdempotencyHealthIndicator,
    OutcomeDoors,
    OutcomeDoorInterceptor,
    HttpContextAdapter,
    RpcContextAdapter,
    GraphqlContextAdapter,
    McpContextAdapter,
    CallDescriber,
    IdempotencyAdmin,
  ],
})
export class IdempotencyModule extends ConfigurableIdempotencyModule {}
