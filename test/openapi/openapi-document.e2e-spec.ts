import { Body, Controller, Get, HttpCode, INestApplication, Post, Put } from '@nestjs/common';
import { ApiCreatedResponse, ApiHeader, ApiResponse, DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { Test } from '@nestjs/testing';
import { execFileSync } from 'node:child_process';
import {
  Idempotent,
  IdempotencyModule,
  IdempotentOutcome,
  InMemoryIdempotencyRepository,
  ProblemType,
} from 'nestjs-dynamodb-idempotency';

class Order {
  id!: string;
}

@Controller('orders')
class OrdersController {
  @Post()
  @Idempotent({ ttlSeconds: 3600 })
  @ApiCreatedResponse({ description: 'The order', type: Order })
  create(@Body() body: { item: string }) {
    return { id: body.item };
  }

  @Put(':id')
  @Idempotent({ required: false, mode: 'optimistic', scope: false })
  @HttpCode(202)
  replace() {
    return {};
  }

  @Post('by-number')
  @Idempotent({ key: (request) => request.body.number })
  @ApiResponse({ status: 409, description: 'The shop says: an order with this number is being placed' })
  byNumber() {
    return {};
  }

  @Get()
  list() {
    return [];
  }

  @Get('outcome')
  @IdempotentOutcome('POST /orders', { maxWaitSeconds: 20 })
  outcome() {}
}

type Operation = {
  parameters?: { in: string; name: string; required?: boolean; description?: string; schema?: object }[];
  responses: Record<
    string,
    { description: string; headers?: Record<string, unknown>; content?: Record<string, { schema: unknown }> }
  >;
  'x-idempotency'?: Record<string, unknown>;
  'x-idempotency-outcome'?: Record<string, unknown>;
};

/** The OpenAPI document `@nestjs/swagger` builds for an app with `@Idempotent()` routes, and no code for it. */
describe('the OpenAPI document of idempotent routes', () => {
  let document: ReturnType<typeof SwaggerModule.createDocument>;
  const operation = (path: string, method: string) => (document.paths[path] as Record<string, Operation>)[method];

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          repository: new InMemoryIdempotencyRepository(),
          scope: (_context, request) => request?.user?.id,
          pendingTtlSeconds: 30,
        }),
      ],
      controllers: [OrdersController],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    // Before init, as apps usually build the document (NestFactory.create(), createDocument(), then listen()).
    document = SwaggerModule.createDocument(app, new DocumentBuilder().setTitle('Orders').setVersion('1').build());
    await app.close();
  });

  it('is a valid OpenAPI document (the official schema, through @seriousme/openapi-schema-validator)', () => {
    // The validator is an ES module, which Jest's CommonJS runtime cannot load: it runs in a process of its own.
    const validate = `
      import { Validator } from '@seriousme/openapi-schema-validator';
      let input = '';
      for await (const chunk of process.stdin) input += chunk;
      console.log(JSON.stringify(await new Validator().validate(JSON.parse(input))));`;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', validate], {
      input: JSON.stringify(document),
    });
    const result = JSON.parse(output.toString()) as { valid: boolean; errors?: unknown };
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('documents an outcome door: the key header, Prefer: wait, the stored answer, 404 and 409, and the operation it answers', () => {
    const door = operation('/orders/outcome', 'get');
    expect(door.parameters?.map(({ in: where, name, required }) => [where, name, required])).toEqual([
      ['header', 'Idempotency-Key', true],
      ['header', 'Prefer', false],
    ]);
    expect(door.parameters?.[1].description).toContain('at most 20');
    expect(Object.keys(door.responses).sort()).toEqual(['400', '404', '409', 'default']);
    expect(door.responses['404'].content?.['application/problem+json']).toBeDefined();
    expect(door['x-idempotency-outcome']).toEqual({ operation: 'POST /orders', maxWaitSeconds: 20 });
    expect(door['x-idempotency']).toBeUndefined();
  });

  it('describes the key header with its length, and its expiry policy and scope', () => {
    const [key] = operation('/orders', 'post').parameters!.filter((parameter) => parameter.in === 'header');
    expect(key).toMatchObject({
      name: 'Idempotency-Key',
      required: true,
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    });
    expect(key.description).toContain('for 3600 s after it completed');
    expect(key.description).toContain('a lease of 30 s');
    expect(key.description).toContain('scoped per caller');
  });

  it('lists 400, 409, 422 and 503 as problem+json with one shared schema, Retry-After on 409 and 503', () => {
    const { responses } = operation('/orders', 'post');
    for (const status of ['400', '409', '422', '503']) {
      expect(responses[status].content).toEqual({
        'application/problem+json': { schema: { $ref: '#/components/schemas/IdempotencyProblem' } },
      });
    }
    expect(Object.keys(responses['409'].headers ?? {})).toEqual(['Retry-After']);
    expect(Object.keys(responses['503'].headers ?? {})).toEqual(['Retry-After']);
    expect(responses['422'].headers).toBeUndefined();
    const schema = document.components!.schemas!.IdempotencyProblem as {
      properties: Record<string, { enum?: string[] }>;
    };
    expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(['type', 'title', 'status', 'detail']));
    expect(schema.properties.type.enum).toEqual(
      expect.arrayContaining([ProblemType.inFlight, ProblemType.fingerprintMismatch]),
    );
  });

  it('keeps the route’s own success response and adds Idempotent-Replayed to it', () => {
    const created = operation('/orders', 'post').responses['201'];
    expect(created.description).toBe('The order');
    expect(created.content?.['application/json'].schema).toEqual({ $ref: '#/components/schemas/Order' });
    expect(created.headers).toHaveProperty('Idempotent-Replayed');
    // Without a declared success, the one Nest answers (@HttpCode(202)) carries it.
    expect(operation('/orders/{id}', 'put').responses['202'].headers).toHaveProperty('Idempotent-Replayed');
  });

  it('states the policy in x-idempotency: ttlSeconds, leaseSeconds, mode, and whether keys are scoped', () => {
    expect(operation('/orders', 'post')['x-idempotency']).toEqual({
      key: { header: 'Idempotency-Key', required: true },
      ttlSeconds: 3600,
      leaseSeconds: 30,
      mode: 'lease',
      scopedPerCaller: true,
    });
    expect(operation('/orders/{id}', 'put')['x-idempotency']).toMatchObject({
      mode: 'optimistic',
      scopedPerCaller: false,
    });
    const optional = operation('/orders/{id}', 'put').parameters!.find((parameter) => parameter.in === 'header');
    expect(optional?.required).toBe(false);
  });

  it('documents no header for a key taken from the body, and keeps a response the route declared itself', () => {
    const byNumber = operation('/orders/by-number', 'post');
    expect((byNumber.parameters ?? []).filter((parameter) => parameter.in === 'header')).toEqual([]);
    expect(byNumber['x-idempotency']).toMatchObject({ key: 'derived from the request' });
    expect(byNumber.responses['409'].description).toBe('The shop says: an order with this number is being placed');
  });

  it('leaves routes without @Idempotent() alone', () => {
    const list = operation('/orders', 'get');
    expect(list.parameters ?? []).toEqual([]);
    expect(Object.keys(list.responses)).toEqual(['200']);
    expect(list['x-idempotency']).toBeUndefined();
  });
});

/** A base controller's handler inherited by several controllers, each with its own policy (a common Nest pattern). */
abstract class CrudController {
  @Post()
  create(@Body() body: { name: string }) {
    return { created: body.name };
  }
}

@Controller('books')
@Idempotent({ ttlSeconds: 600 })
class BooksController extends CrudController {}

@Controller('notes')
class NotesController extends CrudController {}

@Controller('pens')
@Idempotent({ ttlSeconds: 60 })
@ApiResponse({ status: 409, description: 'Pens: this pen is being made' })
class PensController extends CrudController {}

@Controller('cups')
@ApiHeader({ name: 'idempotency-key', description: 'The cups team’s own words for the key' })
class CupsController {
  @Post()
  @Idempotent()
  create() {
    return {};
  }
}

describe('the OpenAPI document of inherited handlers and declarations the app made', () => {
  let document: ReturnType<typeof SwaggerModule.createDocument>;
  let app: INestApplication;
  const operation = (path: string) => (document.paths[path] as Record<string, Operation>).post;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository() })],
      controllers: [BooksController, NotesController, PensController, CupsController],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    document = SwaggerModule.createDocument(app, new DocumentBuilder().setTitle('Shop').setVersion('1').build());
    await app.init();
  });
  afterAll(() => app.close());

  it('describes each route of an inherited handler by its own controller’s policy', () => {
    expect(operation('/books')['x-idempotency']).toMatchObject({ ttlSeconds: 600 });
    expect(operation('/pens')['x-idempotency']).toMatchObject({ ttlSeconds: 60 });
    // The unprotected subclass: no key header, no problems, no x-idempotency.
    expect(operation('/notes')['x-idempotency']).toBeUndefined();
    expect(operation('/notes').parameters ?? []).toEqual([]);
    expect(Object.keys(operation('/notes').responses)).toEqual(['201']);
  });

  it('still routes each subclass to the inherited handler, protected as its own class says', async () => {
    await app.listen(0, '127.0.0.1');
    const url = await app.getUrl();
    const send = (path: string, key?: string) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
        body: JSON.stringify({ name: 'x' }),
      });
    expect((await send('/books')).status).toBe(400); // protected: a key is required
    expect((await send('/notes')).status).toBe(201); // not protected
    const first = await send('/books', 'inherited-1');
    const replay = await send('/books', 'inherited-1');
    expect([first.status, replay.headers.get('idempotent-replayed')]).toEqual([201, 'true']);
  });

  it('keeps a 409 the controller class declares, and a key header declared in another letter case, once', () => {
    expect(operation('/pens').responses['409'].description).toBe('Pens: this pen is being made');
    const headers = (operation('/cups').parameters ?? []).filter(
      (parameter) => parameter.in === 'header' && parameter.name.toLowerCase() === 'idempotency-key',
    );
    expect(headers).toHaveLength(1);
    expect(headers[0].description).toBe('The cups team’s own words for the key');
  });
});
