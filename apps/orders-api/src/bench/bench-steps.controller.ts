import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { Idempotent, IdempotencyContext } from 'nestjs-dynamodb-idempotency';

/**
 * Routes of n recovery points for the benchmark's latency runs (BENCH_STEPS=1, an app of their own: injecting
 * `IdempotencyContext` turns call tracking on for the whole app): a first request with n steps sends n + 2 DynamoDB
 * calls (the claim, one write per step, the completion).
 */
@Controller('bench')
export class BenchStepsController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  @Post('steps1')
  @HttpCode(200)
  @Idempotent()
  steps1(@Body() body: unknown) {
    return this.steps(1, body);
  }

  @Post('steps3')
  @HttpCode(200)
  @Idempotent()
  steps3(@Body() body: unknown) {
    return this.steps(3, body);
  }

  private async steps(n: number, body: unknown) {
    const done: number[] = [];
    for (let i = 1; i <= n; i++) done.push(await this.idempotency.step(`step-${i}`, () => i));
    return { ok: true, received: body, steps: done };
  }
}
