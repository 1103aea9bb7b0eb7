import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  BadRequestException,
  Body,
  Controller,
  Get,
  HttpCode,
  Injectable,
  InternalServerErrorException,
  Param,
  Post,
  Res,
  StreamableFile,
} from '@nestjs/common';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Idempotent, IdempotencyModule, IdempotencyModuleOptions } from 'nestjs-dynamodb-idempotency';

/** How often each handler ran, and knobs the tests turn. */
@Injectable()
export class Runs {
  readonly count = new Map<string, number>();
  failuresLeft = 0;
  /** Resolved by a test to let a parked handler finish. */
  gates = new Map<string, () => void>();

  record(handler: string): number {
    const next = (this.count.get(handler) ?? 0) + 1;
    this.count.set(handler, next);
    return next;
  }

  of(handler: string): number {
    return this.count.get(handler) ?? 0;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

@Controller('payments')
export class PaymentsController {
  constructor(private readonly runs: Runs) {}

  @Post()
  @Idempotent()
  async create(@Body() body: { amount: number; delayMs?: number }, @Res({ passthrough: true }) res: any) {
    if (typeof body?.amount !== 'number') throw new BadRequestException('amount must be a number');
    const run = this.runs.record('create');
    if (body.delayMs) await sleep(body.delayMs);
    if (this.runs.failuresLeft > 0) {
      this.runs.failuresLeft -= 1;
      throw new InternalServerErrorException('payment provider failed');
    }
    const id = `pay_${run}_${Math.random().toString(36).slice(2, 8)}`;
    (res.header ?? res.setHeader).call(res, 'Location', `/payments/${id}`);
    (res.header ?? res.setHeader).call(res, 'Set-Cookie', 'session=secret');
    return { id, amount: body.amount, run, at: new Date(Date.UTC(2026, 0, 1)) };
  }

  @Post('wait')
  @Idempotent({ waitMs: 5000 })
  async createAndWait(@Body() body: { delayMs: number }) {
    const run = this.runs.record('wait');
    await sleep(body.delayMs);
    return { run };
  }

  @Post('parked/:gate')
  @Idempotent({ pendingTtlSeconds: 5 })
  async parked(@Param('gate') gate: string) {
    const run = this.runs.record(`parked:${gate}`);
    await new Promise<void>((resolve) => this.runs.gates.set(`${gate}:${run}`, resolve));
    return { gate, run };
  }

  @Post('by-order')
  @Idempotent({ key: (request) => request.body?.orderNumber })
  byOrder(@Body() body: { orderNumber: string }) {
    return { orderNumber: body.orderNumber, run: this.runs.record('by-order') };
  }

  @Post('optional')
  @Idempotent({ required: false })
  optional() {
    return { run: this.runs.record('optional') };
  }

  @Post('file')
  @Idempotent()
  file() {
    this.runs.record('file');
    return new StreamableFile(Readable.from([Buffer.from('streamed')]));
  }

  @Post('body/:kind')
  @Idempotent()
  @HttpCode(200)
  body(@Param('kind') kind: string, @Res({ passthrough: true }) res: any) {
    this.runs.record(`body:${kind}`);
    const status = (code: number) => (res.code ?? res.status).call(res, code);
    switch (kind) {
      case 'empty':
        status(204);
        return undefined;
      case 'null':
        return null;
      case 'string':
        return 'plain text';
      case 'array':
        return [1, { two: 2 }, 'three'];
      case 'accepted':
        status(202);
        return { queued: true };
      case 'buffer':
        return Buffer.from([0, 1, 2, 250]);
      case 'unstorable':
        return { amount: BigInt(10) }; // not JSON: recorded as done without a body
      default:
        return { kind };
    }
  }

  @Post('huge')
  @Idempotent()
  huge() {
    this.runs.record('huge');
    // ~600 KB of random text: over DynamoDB's 400 KB item limit even gzipped.
    return { blob: randomBytes(450 * 1024).toString('base64') };
  }

  @Post('large')
  @Idempotent()
  large() {
    this.runs.record('large');
    // ~700 KB of repetitive JSON: over the item limit as text, far under it gzipped.
    return { rows: Array.from({ length: 20_000 }, (_, id) => ({ id, name: `row ${id}` })) };
  }

  @Get('unprotected')
  unprotected() {
    return { ok: true };
  }
}

/** The fixture app: the payments controller on an idempotency table, scoped by an `x-tenant` header. */
export function paymentsModule(client: DynamoDBClient, tableName: string, options: IdempotencyModuleOptions = {}) {
  return {
    imports: [
      IdempotencyModule.forRoot({
        client,
        tableName,
        scope: (context) => context.switchToHttp().getRequest().headers['x-tenant'],
        ...options,
      }),
    ],
    controllers: [PaymentsController],
    providers: [Runs],
  };
}
