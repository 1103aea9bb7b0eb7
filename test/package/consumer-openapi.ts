// A throwaway consumer for `npm run test:package`: the packed library beside @nestjs/swagger, as a user installs them.
// Builds the OpenAPI document of an app with one @Idempotent() route, validates it against the official OpenAPI schema
// and checks that the route is described; prints "openapi ok" or throws.
import 'reflect-metadata';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Idempotent, IdempotencyModule, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';

@Controller()
class ChargesController {
  @Post('charges')
  @Idempotent()
  charge(@Body() body: { amount: number }) {
    return { amount: body.amount };
  }
}

@Module({
  imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository() })],
  controllers: [ChargesController],
})
class AppModule {}

async function main() {
  const app = await NestFactory.create(AppModule, { logger: false });
  const document = SwaggerModule.createDocument(
    app,
    new DocumentBuilder().setTitle('consumer').setVersion('1').build(),
  );
  await app.close();
  const result = await new Validator().validate(JSON.parse(JSON.stringify(document)));
  if (!result.valid) throw new Error(`invalid OpenAPI document: ${JSON.stringify(result.errors)}`);
  const charge = (document.paths['/charges'] as Record<string, { parameters?: { name: string }[]; responses: object }>)
    .post;
  const described =
    charge.parameters?.some((parameter) => parameter.name === 'Idempotency-Key') &&
    ['409', '422', '503'].every((status) => status in charge.responses) &&
    'x-idempotency' in charge;
  if (!described) throw new Error(`POST /charges is not described as idempotent: ${JSON.stringify(charge)}`);
  console.log('openapi ok');
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
