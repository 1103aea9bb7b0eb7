// A throwaway consumer app for `npm run test:package`: what a user writes after `npm install nestjs-dynamodb-idempotency`.
// The same file is built as CommonJS (NestJS 11) and as ESM (NestJS 12); it imports packages only.
import 'reflect-metadata';
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { Body, Controller, Get, InternalServerErrorException, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ensureIdempotencyTable, IdempotencyContext, Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';

let charges = 0;
let debits = 0;
let transferFailed = false;
const self = `http://127.0.0.1:${process.env.PORT}`;
const failure = (error: { name: string; cause?: { name: string } }) => error.cause?.name ?? error.name;

@Controller()
class ChargesController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  /** Two steps; the first run fails after the debit (a 500, not final), the retry resumes from the recorded debit. */
  @Post('transfers')
  @Idempotent()
  async transfer() {
    const debit = await this.idempotency.step('debit', ({ attempt }) => ({
      debit: ++debits,
      attempt,
      at: new Date(0),
    }));
    if (!transferFailed) {
      transferFailed = true;
      throw new InternalServerErrorException('the bank timed out');
    }
    const credit = await this.idempotency.step('credit', ({ key }) => ({ key }));
    return { debit: debit.debit, debitedAt: debit.at.toISOString(), creditKey: credit.key, debits };
  }

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

  /**
   * Calls out three ways inside a protected call (the module has `unkeyedCalls: 'error'`): a charge through the
   * retrying client by name (keyed: sent), a POST without a key and a DynamoDB put without a condition (both refused).
   */
  @Post('checkouts')
  @Idempotent()
  async checkout() {
    const charge = await createIdempotentClient({ baseUrl: self }).request('POST', '/charges', {
      name: 'charge',
      body: { amount: 7 },
    });
    const unkeyed = await fetch(`${self}/charges`, { method: 'POST' }).then(() => 'sent', failure);
    const put = new PutItemCommand({ TableName: process.env.IDEMPOTENCY_TABLE, Item: { pk: { S: 'unkeyed' } } });
    const write = await client.send(put).then(() => 'written', failure);
    return { status: charge.status, key: charge.key, unkeyed, write };
  }
}

const client = new DynamoDBClient({
  endpoint: process.env.DYNAMODB_ENDPOINT,
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});

@Module({
  imports: [IdempotencyModule.forRoot({ client, tableName: process.env.IDEMPOTENCY_TABLE, unkeyedCalls: 'error' })],
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
