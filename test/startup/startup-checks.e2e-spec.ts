import { Controller, Get, Injectable, Next, Post, Res, SetMetadata, Sse } from '@nestjs/common';
import {
  Idempotent,
  IdempotencyModule,
  IdempotencyModuleOptions,
  IdempotentOptions,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { Mutation, Query, Resolver, Subscription } from '@nestjs/graphql';
import { Observable, of } from 'rxjs';
import { PLATFORMS, startApp } from '../support/app';

/** Startup refuses what cannot be protected or is misconfigured, naming the handler; it never answers 500s later. */
const boot = (
  platform: (typeof PLATFORMS)[number],
  controllers: unknown[],
  providers: unknown[] = [],
  module: IdempotencyModuleOptions = {},
) =>
  startApp(platform, {
    imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository(), ...module })],
    controllers: controllers as never[],
    providers: providers as never[],
  });

@Controller('raw')
class RawResponseController {
  @Post()
  @Idempotent()
  create(@Res() res: { status(code: number): { send(body: string): void } }) {
    res.status(201).send('written by hand');
  }
}

@Controller('next')
class NextController {
  @Post()
  @Idempotent()
  create(@Next() next: () => void) {
    next();
  }
}

@Controller('events')
class EventsController {
  @Sse()
  @Idempotent()
  stream(): Observable<{ data: string }> {
    return of({ data: 'tick' });
  }
}

/** What `@SubscribeMessage('pay')` of @nestjs/websockets writes on a gateway method. */
@Injectable()
class PaymentsGateway {
  @SetMetadata('message', 'pay')
  @Idempotent()
  onPay() {
    return 'paid';
  }
}

/** GraphQL: only mutations may be idempotent. */
@Resolver()
class OrdersResolver {
  @Query(() => String)
  @Idempotent()
  order() {
    return '1';
  }
}

@Resolver()
class TicksResolver {
  @Subscription(() => String)
  @Idempotent()
  ticks() {
    return undefined;
  }
}

@Resolver()
class KeyedByArgumentOnQueryResolver {
  @Mutation(() => String)
  @Idempotent({ keyFrom: { arg: 'input.requestId' } })
  pay() {
    return 'paid';
  }
}

@Controller('keyed')
class KeyFromOnRouteController {
  @Post()
  @Idempotent({ keyFrom: { arg: 'requestId' } })
  create() {
    return 'created';
  }
}

function routeWith(options: IdempotentOptions) {
  @Controller('configured')
  class ConfiguredController {
    @Post()
    @Idempotent(options)
    create() {
      return { ok: true };
    }
  }
  return ConfiguredController;
}

describe.each(PLATFORMS)('startup checks on %s', (platform) => {
  it('refuses @Res() without passthrough, naming the handler and the fix', async () => {
    await expect(boot(platform, [RawResponseController])).rejects.toThrow(
      /RawResponseController\.create: @Res\(\) without passthrough .* use @Res\(\{ passthrough: true \}\)/,
    );
  });

  it('refuses @Next()', async () => {
    await expect(boot(platform, [NextController])).rejects.toThrow(/NextController\.create: @Next\(\)/);
  });

  it('refuses an @Sse() route', async () => {
    await expect(boot(platform, [EventsController])).rejects.toThrow(/EventsController\.stream: @Sse\(\) routes/);
  });

  it('refuses a WebSocket gateway handler, a GraphQL query and a GraphQL subscription', async () => {
    await expect(boot(platform, [], [PaymentsGateway])).rejects.toThrow(
      /PaymentsGateway\.onPay: WebSocket gateway handlers are not supported/,
    );
    await expect(boot(platform, [], [OrdersResolver])).rejects.toThrow(
      /OrdersResolver\.order: a GraphQL query cannot be @Idempotent\(\): only mutations/,
    );
    await expect(boot(platform, [], [TicksResolver])).rejects.toThrow(
      /TicksResolver\.ticks: a GraphQL subscription cannot be @Idempotent\(\)/,
    );
  });

  it('accepts keyFrom on a GraphQL mutation and refuses it on an HTTP route', async () => {
    const app = await boot(platform, [], [KeyedByArgumentOnQueryResolver]);
    await app.close();
    await expect(boot(platform, [KeyFromOnRouteController])).rejects.toThrow(
      /KeyFromOnRouteController\.create: keyFrom: \{ arg \} reads a GraphQL mutation's or an MCP tool's arguments/,
    );
  });

  it('checks the routes a class-level @Idempotent() protects, and refuses it on a provider', async () => {
    @Controller('class-level')
    @Idempotent()
    class ClassLevelController {
      @Get()
      read(@Res() res: { send(body: string): void }) {
        res.send('a GET is not protected, so writing the response by hand is fine');
      }

      @Post()
      create(@Res() res: { send(body: string): void }) {
        res.send('written by hand');
      }
    }
    await expect(boot(platform, [ClassLevelController])).rejects.toThrow(
      /ClassLevelController\.create: @Res\(\) without passthrough/,
    );
    await expect(boot(platform, [ClassLevelController])).rejects.not.toThrow(/ClassLevelController\.read/);

    @Injectable()
    @Idempotent()
    class BillingService {
      bill() {
        return 'billed';
      }
    }
    await expect(boot(platform, [], [BillingService])).rejects.toThrow(
      /BillingService: @Idempotent\(\) on a class protects a controller's POST, PUT, PATCH and DELETE routes or a resolver's mutations; this is neither/,
    );
  });

  it.each([
    [{ storeIf: 'yes' as never }, /ConfiguredController\.create: idempotency option storeIf must be a function/],
    [
      { keyFrom: { arg: '' } },
      /ConfiguredController\.create: idempotency option keyFrom must be \{ arg: 'path\.to\.argument' \}/,
    ],
    [
      { ttlSeconds: -5 },
      /ConfiguredController\.create: idempotency option ttlSeconds must be a positive whole number of seconds, got -5/,
    ],
    [{ pendingTtlSeconds: 1.5 }, /ConfiguredController\.create: idempotency option pendingTtlSeconds .* got 1\.5/],
    [{ maxLeaseSeconds: 0 }, /ConfiguredController\.create: idempotency option maxLeaseSeconds .* got 0/],
    [
      { retryAfterSeconds: Number.NaN },
      /ConfiguredController\.create: idempotency option retryAfterSeconds .* got NaN/,
    ],
    [{ waitMs: -1 }, /ConfiguredController\.create: idempotency option waitMs .* got -1/],
  ] as Array<[IdempotentOptions, RegExp]>)('refuses the route option %j', async (options, message) => {
    await expect(boot(platform, [routeWith(options)])).rejects.toThrow(message);
  });

  it.each([
    [
      { replayCache: { maxEntries: Number.NaN } },
      /replayCache\.maxEntries must be a positive whole number of entries, got NaN/,
    ],
    [{ replayCache: { maxEntries: 0 } }, /replayCache\.maxEntries .* got 0/],
    [{ replayCache: { maxEntries: -10 } }, /replayCache\.maxEntries .* got -10/],
    [
      { replayCache: { maxAgeSeconds: 0 } },
      /replayCache\.maxAgeSeconds must be a positive whole number of seconds, got 0/,
    ],
    [{ reconcileIntervalSeconds: 0 }, /reconcileIntervalSeconds .* got 0/],
    [{ maxLeaseSeconds: -1 }, /maxLeaseSeconds .* got -1/],
    [{ retryAfterSeconds: 2.5 }, /retryAfterSeconds .* got 2\.5/],
    [
      { storeIf: 402 as never },
      /IdempotencyModule: idempotency option storeIf must be a function \(status, error\?\) => boolean, got 402/,
    ],
  ] as Array<[IdempotencyModuleOptions, RegExp]>)('refuses the module option %j', async (options, message) => {
    await expect(boot(platform, [routeWith({})], [], options)).rejects.toThrow(message);
  });

  it('starts with valid options and @Res({ passthrough: true })', async () => {
    @Controller('fine')
    class FineController {
      @Post()
      @Idempotent({ ttlSeconds: 60, pendingTtlSeconds: 5, maxLeaseSeconds: 600, retryAfterSeconds: 2, waitMs: 0 })
      create(@Res({ passthrough: true }) _res: unknown) {
        return { ok: true };
      }
    }
    const app = await boot(platform, [FineController], [], {
      replayCache: { maxEntries: 10 },
      reconcileIntervalSeconds: 60,
    });
    await app.close();
  });
});
