import {
  ArgumentsHost,
  BadRequestException,
  Body,
  Catch,
  ConflictException,
  Controller,
  ExceptionFilter,
  ExecutionContext,
  Get,
  HttpException,
  NotFoundException,
  Patch,
  Post,
  Put,
  ServiceUnavailableException,
  UnprocessableEntityException,
  UseFilters,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyModuleOptions,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { CapturedLogs } from '../support/logs';
import { RunsByKey } from '../support/runs-by-key';
import { PLATFORMS, post, sendJson, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable, scanTable } from '../support/table';

/** How many times each key ran, over every app instance of the test. */
const runsOf = (key: string) => RunsByKey.of(key);

/** What the handler throws for each requested outcome. */
const OUTCOMES: Record<string, () => unknown> = {
  ok: () => ({ charged: true }),
  declined: () => {
    throw new HttpException({ code: 'card_declined', message: 'Your card was declined.' }, 402);
  },
  forbidden: () => {
    throw new HttpException('Not your card', 403);
  },
  gone: () => {
    throw new NotFoundException('No such card');
  },
  invalid: () => {
    throw new BadRequestException(['amount must be positive']);
  },
  conflict: () => {
    throw new ConflictException('Card locked by another charge');
  },
  unprocessable: () => {
    throw new UnprocessableEntityException('Currency not supported');
  },
  timeout: () => {
    throw new HttpException('Request Timeout', 408);
  },
  rateLimited: () => {
    throw new HttpException('Too Many Requests', 429);
  },
  unavailable: () => {
    throw new ServiceUnavailableException('Card network down');
  },
  crash: () => {
    throw new Error('the handler crashed');
  },
};

/** The app's own filter for one built-in exception class: a replay must reach it as the first answer did. */
@Catch(NotFoundException)
class CardNotFoundFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}
  catch(exception: NotFoundException, host: ArgumentsHost) {
    const response = host.switchToHttp().getResponse();
    this.adapterHost.httpAdapter.reply(response, { filtered: 'card-not-found', message: exception.message }, 404);
  }
}

/** Class-level @Idempotent(): POST, PUT, PATCH and DELETE routes are protected; GET is not. */
@Controller('cards')
@Idempotent({ ttlSeconds: 600 })
@UseFilters(CardNotFoundFilter)
class CardsController {
  constructor(private readonly runs: RunsByKey) {}

  @Post('charge')
  charge(@Body() body: { key: string; outcome: string }) {
    this.runs.count(body.key);
    return OUTCOMES[body.outcome]();
  }

  @Post('charge-once-created')
  @Idempotent({ storeIf: (status) => status === 201 })
  chargeStoringOnlyCreated(@Body() body: { key: string; outcome: string }) {
    this.runs.count(body.key);
    return OUTCOMES[body.outcome]();
  }

  @Put('limit')
  setLimit(@Body() body: { key: string }) {
    this.runs.count(body.key);
    return { limit: 100 };
  }

  @Patch('note')
  @Idempotent({ required: false })
  setNote(@Body() body: { key: string }) {
    this.runs.count(body.key);
    return { noted: true };
  }

  @Get('balance')
  balance() {
    return { balance: 42 };
  }
}

describe.each(PLATFORMS)('final outcomes (storeIf) and the class-level decorator on %s', (platform) => {
  let dynamo: Dynalite;
  let tableName: string;
  let first: TestApp;
  let second: TestApp;
  let keys = 0;
  const newKey = () => `final-${platform}-${++keys}`;

  // Two instances without replay cache: every duplicate reads the record from dynalite.
  const boot = (module: IdempotencyModuleOptions = {}) =>
    startApp(platform, {
      imports: [
        IdempotencyModule.forRoot({
          client: localClient(dynamo.endpoint),
          tableName,
          replayCache: { enabled: false },
          ...module,
        }),
      ],
      controllers: [CardsController],
      providers: [RunsByKey, CardNotFoundFilter],
    });

  beforeAll(async () => {
    dynamo = await startDynalite();
    tableName = uniqueTableName('final');
    await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
    [first, second] = [await boot(), await boot()];
  });
  afterAll(async () => {
    await first.close();
    await second.close();
    await dynamo.stop();
  });

  const charge = (app: TestApp, key: string, outcome: string, path = 'charge') =>
    post(`${app.url}/cards/${path}`, { key, outcome }, { 'Idempotency-Key': key });

  it('stores a 402 and replays it from DynamoDB to a retry on another instance, status and body, without running again', async () => {
    const key = newKey();
    const original = await charge(first, key, 'declined');
    const retry = await charge(second, key, 'declined');
    expect(original.status).toBe(402);
    expect(JSON.parse(original.text)).toEqual({ code: 'card_declined', message: 'Your card was declined.' });
    expect(original.headers.get('idempotent-replayed')).toBeNull();
    expect(retry.status).toBe(402);
    expect(retry.text).toBe(original.text);
    expect(retry.headers.get('content-type')).toBe(original.headers.get('content-type'));
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(runsOf(key)).toBe(1);
  });

  it('stores the record as COMPLETED with the exception class, status and body', async () => {
    const key = newKey();
    await charge(first, key, 'forbidden');
    const items = (await scanTable(localClient(dynamo.endpoint), tableName)).map(({ item }) => item);
    const completed = items
      .filter((item) => item.status === 'COMPLETED')
      .map((item) => JSON.parse(item.response as string));
    expect(completed).toContainEqual(
      expect.objectContaining({ statusCode: 403, exception: 'HttpException', body: 'Not your card' }),
    );
    const retry = await charge(second, key, 'forbidden');
    expect(retry.status).toBe(403);
    expect(runsOf(key)).toBe(1);
  });

  it("replays a built-in exception as its own class, so the app's @Catch(NotFoundException) filter answers the retry too", async () => {
    const key = newKey();
    const original = await charge(first, key, 'gone');
    const retry = await charge(second, key, 'gone');
    expect(original.status).toBe(404);
    expect(JSON.parse(original.text)).toEqual({ filtered: 'card-not-found', message: 'No such card' });
    expect(retry.status).toBe(404);
    expect(retry.text).toBe(original.text);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(runsOf(key)).toBe(1);
  });

  it.each(['invalid', 'timeout', 'conflict', 'unprocessable', 'rateLimited', 'unavailable', 'crash'])(
    'releases the key after a %s error by default: the retry runs the handler again',
    async (outcome) => {
      const key = newKey();
      const original = await charge(first, key, outcome);
      const retry = await charge(second, key, outcome);
      expect([400, 408, 409, 422, 429, 503, 500]).toContain(original.status);
      expect(retry.status).toBe(original.status);
      expect(retry.headers.get('idempotent-replayed')).toBeNull();
      expect(runsOf(key)).toBe(2);
    },
  );

  it("a route's storeIf overrides the module's: here a 402 is not final, a 201 is", async () => {
    const declined = newKey();
    await charge(first, declined, 'declined', 'charge-once-created');
    const retried = await charge(second, declined, 'declined', 'charge-once-created');
    expect(retried.status).toBe(402);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(runsOf(declined)).toBe(2);

    const ok = newKey();
    await charge(first, ok, 'ok', 'charge-once-created');
    const replay = await charge(second, ok, 'ok', 'charge-once-created');
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(runsOf(ok)).toBe(1);
  });

  it("the module's storeIf applies to every route without its own: nothing but 2xx is final here", async () => {
    const strict = await boot({ storeIf: (status) => status < 300 });
    try {
      const key = newKey();
      await charge(strict, key, 'declined');
      const retry = await charge(strict, key, 'declined');
      expect(retry.status).toBe(402);
      expect(retry.headers.get('idempotent-replayed')).toBeNull();
      expect(runsOf(key)).toBe(2);
    } finally {
      await strict.close();
    }
  });

  it('the class-level decorator protects PUT (a key is required) and leaves GET alone', async () => {
    const missing = await sendJson('PUT', `${first.url}/cards/limit`, { key: 'none' });
    expect(missing.status).toBe(400);
    expect(JSON.parse(missing.text)).toMatchObject({ type: 'urn:nestjs-dynamodb-idempotency:key-missing' });

    const key = newKey();
    const put = (app: TestApp) => sendJson('PUT', `${app.url}/cards/limit`, { key }, { 'Idempotency-Key': key });
    await put(first);
    const again = await put(second);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(runsOf(key)).toBe(1);

    const balance = await fetch(`${first.url}/cards/balance`);
    expect(balance.status).toBe(200);
  });

  it("a handler's own options merge over the class's field by field: required: false here, ttlSeconds 600 from the class", async () => {
    const unkeyed = await sendJson('PATCH', `${first.url}/cards/note`, { key: 'unkeyed' });
    expect(unkeyed.status).toBe(200);

    const key = newKey();
    const before = Math.floor(first.clock.nowMs() / 1000);
    await sendJson('PATCH', `${first.url}/cards/note`, { key }, { 'Idempotency-Key': key });
    const items = (await scanTable(localClient(dynamo.endpoint), tableName)).map(({ item }) => item);
    const note = items.filter((item) => item.pk.startsWith('PATCH /cards/note#') && item.status === 'COMPLETED');
    expect(note).toHaveLength(1);
    expect(note[0].expires_at - before).toBeGreaterThanOrEqual(600);
    expect(note[0].expires_at - before).toBeLessThan(602);
  });
});

/** Every request is authenticated (see the guard below). */
@Controller('profile')
class ProfileController {
  @Post('unscoped')
  @Idempotent()
  unscoped() {
    return { saved: true };
  }

  @Post('webhook')
  @Idempotent({ scope: false })
  webhook() {
    return { received: true };
  }
}

describe.each(PLATFORMS)('a warning for authenticated requests without a scope, on %s', (platform) => {
  const logs = new CapturedLogs();
  let app: TestApp;
  beforeAll(async () => {
    app = await startApp(
      platform,
      {
        imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository() })],
        controllers: [ProfileController],
      },
      {
        // Authentication as Passport does it: a guard (before interceptors) sets req.user.
        configure: (nest) =>
          nest.useGlobalGuards({
            canActivate: (context: ExecutionContext) => {
              context.switchToHttp().getRequest().user = { id: 'alice' };
              return true;
            },
          }),
      },
    );
    // After the app is created: creating it applies its own logger setting (none, in tests).
    logs.start();
  });
  afterAll(async () => {
    await app.close();
    logs.stop();
  });

  it('logs once per route that keys are shared across callers; scope: false silences it', async () => {
    for (const key of ['p1', 'p2', 'p3']) {
      await post(`${app.url}/profile/unscoped`, {}, { 'Idempotency-Key': key });
      await post(`${app.url}/profile/webhook`, {}, { 'Idempotency-Key': key });
    }
    const shared = logs
      .at('warn')
      .map(String)
      .filter((warning) => warning.includes('no scope is configured'));
    expect(shared).toHaveLength(1);
    expect(shared[0]).toMatch(/^POST \/profile\/unscoped: requests carry an authenticated user \(req\.user\)/);
  });
});
