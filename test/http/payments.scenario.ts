import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IdempotencyModuleOptions } from 'nestjs-dynamodb-idempotency';
import { Platform, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';
import { paymentsModule } from './payments.fixture';

/** The payments fixture app on its own dynalite and table. */
export interface PaymentsScenario {
  dynamo: Dynalite;
  /** A client straight to dynalite, for reading the table. */
  client: DynamoDBClient;
  tableName: string;
  test: TestApp;
  stop(): Promise<void>;
}

/** `appEndpoint` lets the app talk through something else (a fault proxy) while the table is set up directly. */
export async function startPaymentsScenario(
  platform: Platform,
  options: { appEndpoint?: (dynamo: Dynalite) => Promise<string>; module?: IdempotencyModuleOptions } = {},
): Promise<PaymentsScenario> {
  const dynamo = await startDynalite();
  const client = localClient(dynamo.endpoint);
  const tableName = uniqueTableName();
  await createIdempotencyTable(client, tableName);
  const appClient = options.appEndpoint ? localClient(await options.appEndpoint(dynamo)) : client;
  const test = await startApp(platform, paymentsModule(appClient, tableName, options.module));
  return {
    dynamo,
    client,
    tableName,
    test,
    stop: async () => {
      await test.close();
      await dynamo.stop();
    },
  };
}
