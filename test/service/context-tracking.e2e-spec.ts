import {
  CallHandler,
  Controller,
  ExecutionContext,
  forwardRef,
  Inject,
  Injectable,
  NestInterceptor,
  Post,
  Type,
  UseInterceptors,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  Idempotent,
  IdempotencyContext,
  IdempotencyModule,
  IdempotencyService,
  InMemoryIdempotencyRepository,
} from 'nestjs-dynamodb-idempotency';
import { post } from '../support/app';

/**
 * The module tracks protected calls through AsyncLocalStorage (which costs every promise of the process on Node 20
 * and 22) only when something needs it: the application has IdempotencyContext injected, or the module watches
 * unkeyed side effects (`unkeyedCalls`, on by default). These tests read the singleton context inside a call: it
 * answers when calls are tracked, and explains itself when they are not.
 */
async function appWith(
  metadata: { providers?: unknown[]; controllers?: Type[] },
  unkeyedCalls: 'warn' | 'off' = 'off',
) {
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository(), unkeyedCalls })],
    providers: (metadata.providers ?? []) as Type[],
    controllers: metadata.controllers ?? [],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  return app;
}

let calls = 0;
/** The injected (singleton) context's record key, read inside a protected call. */
const recordKeyInsideCall = (app: Awaited<ReturnType<typeof appWith>>) =>
  app
    .get(IdempotencyService)
    .execute({ operation: 'probe', key: `k-${++calls}` }, () => app.get(IdempotencyContext).recordKey);

@Injectable()
class ByConstructor {
  constructor(readonly context: IdempotencyContext) {}
}

/** Typed loosely, as under a circular import (the emitted design type is then no help): only the forwardRef names it. */
@Injectable()
class ByForwardRef {
  constructor(@Inject(forwardRef(() => IdempotencyContext)) readonly context: unknown) {}
}

@Injectable()
class ByProperty {
  @Inject() readonly context!: IdempotencyContext;
}

@Injectable()
class InjectingInterceptor implements NestInterceptor {
  constructor(readonly context: IdempotencyContext) {}
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle();
  }
}

@Controller('tracked')
@UseInterceptors(InjectingInterceptor)
class EnhancedController {
  @Post()
  create() {
    return { ok: true };
  }
}

@Controller('untracked')
class PlainController {
  @Post()
  @Idempotent()
  create() {
    return { ok: true };
  }
}

describe('IdempotencyContext call tracking', () => {
  it.each([
    ['a constructor parameter', { providers: [ByConstructor] }],
    ['forwardRef', { providers: [ByForwardRef] }],
    ['a property', { providers: [ByProperty] }],
    [
      'a factory provider',
      {
        providers: [
          { provide: 'USES_CONTEXT', inject: [IdempotencyContext], useFactory: (context: unknown) => ({ context }) },
        ],
      },
    ],
    ['an interceptor on a controller', { controllers: [EnhancedController] }],
  ])('is on when IdempotencyContext is injected through %s', async (_, metadata) => {
    const app = await appWith(metadata);
    try {
      await expect(recordKeyInsideCall(app)).resolves.toMatch(/^fn probe#[0-9a-f]{64}$/);
    } finally {
      await app.close();
    }
  });

  it('is on when the module watches unkeyed side effects (the default), without an injection', async () => {
    const app = await appWith({ controllers: [PlainController] }, 'warn');
    try {
      await expect(recordKeyInsideCall(app)).resolves.toMatch(/^fn probe#[0-9a-f]{64}$/);
      expect(app.get(IdempotencyContext).active).toBe(false);
    } finally {
      await app.close();
    }
  });

  describe("in an application that never injects IdempotencyContext, with unkeyedCalls: 'off'", () => {
    let app: Awaited<ReturnType<typeof appWith>>;
    beforeAll(async () => (app = await appWith({ controllers: [PlainController] })));
    afterAll(() => app.close());

    it('is off: the singleton context, taken with app.get(), explains why instead of answering "not in a call"', async () => {
      await expect(recordKeyInsideCall(app)).rejects.toThrow(
        /does not track protected calls.*Inject it in the constructor/,
      );
      expect(() => app.get(IdempotencyContext).active).toThrow(/does not track protected calls/);
      expect(() => app.get(IdempotencyContext).canCommitWith).toThrow(/does not track protected calls/);
    });

    it('still hands execute() a context bound to its call, and protects routes', async () => {
      const seen = await app.get(IdempotencyService).execute({ operation: 'bound', key: 'k' }, (context) => ({
        active: context.active,
        recordKey: context.recordKey,
        derived: context.deriveKey('x'),
      }));
      expect(seen).toEqual({
        active: true,
        recordKey: expect.stringMatching(/^fn bound#/),
        derived: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      const url = await app.getUrl();
      const first = await post(`${url}/untracked`, {}, { 'Idempotency-Key': 'route-key' });
      const second = await post(`${url}/untracked`, {}, { 'Idempotency-Key': 'route-key' });
      expect([first.status, second.status]).toEqual([201, 201]);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
    });
  });
});
