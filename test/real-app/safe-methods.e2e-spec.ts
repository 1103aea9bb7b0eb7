import { Controller, Get, Head, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Idempotent, IdempotencyModule, InMemoryIdempotencyRepository, ProblemType } from 'nestjs-dynamodb-idempotency';
import { Platform, PLATFORMS, startApp } from '../support/app';
import { CapturedLogs } from '../support/logs';

/** @Idempotent() on a GET, HEAD or OPTIONS handler: a startup warning naming it, and a 400 that says why. */
@Controller('orders')
class OrdersController {
  @Get()
  @Idempotent()
  list() {
    return [];
  }

  @Head('probe')
  @Idempotent()
  probe() {
    return undefined;
  }

  @Post()
  @Idempotent()
  create() {
    return { created: true };
  }
}

it('warns at startup naming each GET and HEAD handler, and not the POST', async () => {
  const logs = new CapturedLogs();
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository() })],
    controllers: [OrdersController],
  }).compile();
  logs.start(); // compile() applied its own logger setting
  await moduleRef.init();
  const warnings = logs.at('warn').map(String);
  logs.stop();
  await moduleRef.close();
  expect(warnings.filter((line) => line.includes('OrdersController.list: @Idempotent() on a GET route'))).toHaveLength(
    1,
  );
  expect(
    warnings.filter((line) => line.includes('OrdersController.probe: @Idempotent() on a HEAD route')),
  ).toHaveLength(1);
  expect(warnings.some((line) => line.includes('OrdersController.create'))).toBe(false);
});

describe.each(PLATFORMS)('@Idempotent() on safe methods, on %s', (platform: Platform) => {
  it('answers a GET without a key with a 400 that says a GET is safe to repeat', async () => {
    const app = await startApp(platform, {
      imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository() })],
      controllers: [OrdersController],
    });
    try {
      const response = await fetch(`${app.url}/orders`);
      expect(response.status).toBe(400);
      const problem = (await response.json()) as { type: string; detail: string };
      expect(problem.type).toBe(ProblemType.keyMissing);
      expect(problem.detail).toMatch(/requires an Idempotency-Key header.*A GET is safe to repeat by HTTP semantics/);
      const post = (await (await fetch(`${app.url}/orders`, { method: 'POST' })).json()) as { detail: string };
      expect(post.detail).not.toMatch(/safe to repeat/);
    } finally {
      await app.close();
    }
  });
});
