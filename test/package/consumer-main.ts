// A throwaway consumer app for `npm run test:package`: what a user writes after `npm install nestjs-dynamodb-idempotency`.
// The same file is built as CommonJS (NestJS 11) and as ESM (NestJS 12); it imports packages only.
import 'reflect-metadata';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Body, Controller, Get, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ensureIdempotencyTable, Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';

let charges = 0;

@Controller()
class ChargesController {
  @Post('charges')
  @Idempotent()
  charge(@Body() body: { amount: number }) {
    charges += 1;
    return { charge: charges, amount: body.amount };
  }

  @Get('charges/count')
  count() {
    return { charges };
  }
}

const client = new DynamoDBClient({
  endpoint: process.env.DYNAMODB_ENDPOINT,
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});

@Module({
  imports: [IdempotencyModule.forRoot({ client, tableName: process.env.IDEMPOTENCY_TABLE })],
  controllers: [ChargesController],
})
class AppModule {}

async function main() {
  await ensureIdempotencyTable(client, process.env.IDEMPOTENCY_TABLE ?? 'idempotency_keys', {
    log: () => {},
    warn: () => {},
  });
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  await app.listen(Number(process.env.PORT), '127.0.0.1');
  console.log('consumer ready');
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
