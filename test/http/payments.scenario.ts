import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IdempotencyModuleOptions, TableLayoutOptions } from 'nestjs-dynamodb-idempotency';
import { LayoutName, LAYOUTS } from '../support/layouts';
import { Platform, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, uniqueTableName } from '../support/dynalite';
import { Engine, startStore } from '../support/engines';
import { createIdempotencyTable } from '../support/table';
import { paymentsModule } from './payments.fixture';

/** The payments fixture app on its own table, on its own dynalite (or the run's DynamoDB Local). */
export interface PaymentsScenario {
  dynamo: Dynalite;
  /** A client straight to dynalite, for reading the table. */
  client: DynamoDBClient;
  tableName: string;
  /** The table's layout (the default: `pk` alone). */
  layout: TableLayoutOptions;
  test: TestApp;
  stop(): Promise<void>;
}

/** `appEndpoint` lets the app talk through something else (a fault proxy) while the table is set up directly. */
export async function startPaymentsScenario(
  platform: Platform,
  options: {
    appEndpoint?: (dynamo: Dynalite) => Promise<string>;
    module?: IdempotencyModuleOptions;
    engine?: Engine;
    /** The table's layout, by name (`test/support/layouts.ts`). */
    layout?: LayoutName;
  } = {},
): Promise<PaymentsScenario> {
  const dynamo = await startStore(options.engine ?? 'dynalite');
  const client = localClient(dynamo.endpoint);
  const tableName = uniqueTableName();
  const layout = LAYOUTS[options.layout ?? 'default'];
  await createIdempotencyTable(client, tableName, layout);
  const appClient = options.appEndpoint ? localClient(await options.appEndpoint(dynamo)) : client;
  const test = await startApp(platform, paymentsModule(appClient, tableName, { ...layout, ...options.module }));
  return {
    dynamo,
    client,
    tableName,
    layout,
    test,
    stop: async () => {
      await test.close();
      await dynamo.stop();
    },
  };
}
