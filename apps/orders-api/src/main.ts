import { Logger } from '@nestjs/common';
import { configFromEnv } from './config';
import { startOrdersApi } from './orders-api';

async function main(): Promise<void> {
  const { url, microservice } = await startOrdersApi(configFromEnv());
  const logger = new Logger('OrdersApi');
  logger.log(`Orders API listening on ${url}`);
  logger.log(
    `Payments consumer (TCP microservice: order.paid, order.quote) on ${microservice.host}:${microservice.port}`,
  );
  console.log(`
Try a replay: run this twice. The second answer is the same order, with "Idempotent-Replayed: true".

  curl -i -X POST ${url}/orders -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-1' -d '{"item":"book","quantity":1}'

Then: curl ${url}/orders   (one order, however often you ran it)
`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
