import { Readable } from 'node:stream';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  ClassSerializerInterceptor,
  Controller,
  Header,
  HttpCode,
  INestApplication,
  Post,
  Res,
  StreamableFile,
  UseInterceptors,
  Version,
  VERSION_NEUTRAL,
  VersioningOptions,
  VersioningType,
} from '@nestjs/common';
import { APP_INTERCEPTOR, Reflector } from '@nestjs/core';
import { Exclude } from 'class-transformer';
import { Idempotent, IdempotencyModule, IdempotencyModuleOptions, ProblemType } from 'nestjs-dynamodb-idempotency';
import { Platform, PLATFORMS, post, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { CapturedLogs } from '../support/logs';
import { createIdempotencyTable, scanTable } from '../support/table';

/**
 * Every shape of answer a Nest handler gives is replayed exactly as first sent. The replay cache is off, so each
 * replay is decoded from the item DynamoDB (dynalite) returns.
 */
let dynamo: Dynalite;
let client: DynamoDBClient;
beforeAll(async () => {
  dynamo = await startDynalite();
  client = localClient(dynamo.endpoint);
});
afterAll(() => dynamo.stop());

const runs = new Map<string, number>();
const ran = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1).get(name)!;
let keys = 0;
const newKey = () => `faithful-${++keys}`;

/** An app on its own table, replay cache off. */
async function start(
  platform: Platform,
  controllers: Array<new (...args: never[]) => unknown>,
  configure?: (app: INestApplication) => void,
  extra: { providers?: unknown[]; module?: IdempotencyModuleOptions } = {},
): Promise<TestApp & { tableName: string }> {
  const tableName = uniqueTableName('faithful');
  await createIdempotencyTable(client, tableName);
  const test = await startApp(
    platform,
    {
      imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false }, ...extra.module })],
      controllers,
      providers: (extra.providers ?? []) as never[],
    },
    { configure },
  );
  return Object.assign(test, { tableName });
}

/** Apps opened by a test, closed after it. */
const opened: TestApp[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((test) => test.close()));
});
async function open(...args: Parameters<typeof start>): Promise<TestApp & { tableName: string }> {
  const test = await start(...args);
  opened.push(test);
  return test;
}

/** Sends the same request twice with one key: both answers, raw. */
async function twice(url: string, headers: Record<string, string> = {}) {
  const key = newKey();
  const exchange = async () => {
    const response = await fetch(url, { method: 'POST', headers: { 'Idempotency-Key': key, ...headers } });
    return {
      status: response.status,
      type: response.headers.get('content-type'),
      disposition: response.headers.get('content-disposition'),
      location: response.headers.get('location'),
      replayed: response.headers.get('idempotent-replayed'),
      bytes: Buffer.from(await response.arrayBuffer()).toString('base64'),
    };
  };
  const first = await exchange();
  const replay = await exchange();
  return { first, replay };
}

class Account {
  id = 'acc_1';
  @Exclude() password = 'hunter2';
}

@Controller('nested')
class NestedController {
  @Post()
  @Idempotent()
  list() {
    ran('nested');
    return { data: [new Account()], total: 1, owner: { account: new Account() } };
  }
}

@Controller('nested-local')
@UseInterceptors(ClassSerializerInterceptor)
class LocallySerializedController {
  @Post()
  @Idempotent()
  list() {
    return { data: [new Account()], total: 1 };
  }
}

describe.each(PLATFORMS)('faithful replays on %s', (platform) => {
  describe('class instances at any depth', () => {
    const serialized = { data: [{ id: 'acc_1' }], total: 1, owner: { account: { id: 'acc_1' } } };

    it.each([
      [
        'app.useGlobalInterceptors',
        (app: INestApplication) => app.useGlobalInterceptors(new ClassSerializerInterceptor(app.get(Reflector))),
        [],
      ],
      ['APP_INTERCEPTOR', undefined, [{ provide: APP_INTERCEPTOR, useClass: ClassSerializerInterceptor }]],
    ] as const)(
      'behind a ClassSerializerInterceptor registered with %s, the replay is the serialized body',
      async (_how, configure, providers) => {
        const test = await open(platform, [NestedController], configure, { providers: [...providers] });
        const { first, replay } = await twice(`${test.url}/nested`);
        expect(JSON.parse(Buffer.from(first.bytes, 'base64').toString())).toEqual(serialized);
        expect(replay).toEqual({ ...first, replayed: 'true' });
      },
    );

    it('behind a ClassSerializerInterceptor on the controller, the replay is the serialized body', async () => {
      const test = await open(platform, [LocallySerializedController]);
      const { first, replay } = await twice(`${test.url}/nested-local`);
      expect(JSON.parse(Buffer.from(first.bytes, 'base64').toString())).toEqual({ data: [{ id: 'acc_1' }], total: 1 });
      expect(replay).toEqual({ ...first, replayed: 'true' });
    });

    it('without any serializer, the replay is what was sent (the instance as JSON)', async () => {
      const test = await open(platform, [NestedController]);
      const { first, replay } = await twice(`${test.url}/nested`);
      expect(JSON.parse(Buffer.from(first.bytes, 'base64').toString()).data[0].password).toBe('hunter2');
      expect(replay).toEqual({ ...first, replayed: 'true' });
    });
  });

  describe('binary bodies', () => {
    @Controller('binary')
    class BinaryController {
      @Post('uint8')
      @Idempotent()
      @HttpCode(200)
      uint8() {
        ran(`uint8-${platform}`);
        return new Uint8Array([0, 1, 2, 250]);
      }

      @Post('arraybuffer')
      @Idempotent()
      @HttpCode(200)
      arrayBuffer() {
        return new Uint8Array([9, 8, 7]).buffer;
      }

      @Post('file')
      @Idempotent()
      @HttpCode(200)
      file() {
        ran(`file-${platform}`);
        return new StreamableFile(Readable.from([Buffer.from('streamed '), Buffer.from('bytes')]), {
          type: 'text/csv',
          disposition: 'attachment; filename="report.csv"',
        });
      }
    }

    let test: TestApp & { tableName: string };
    beforeAll(async () => (test = await start(platform, [BinaryController])));
    afterAll(() => test.close());

    // Other typed arrays: see stored-response.codec.spec.ts (under Jest they come from another realm than Fastify's checks).
    it.each(['uint8', 'arraybuffer', 'file'])(
      'replays a %s body byte-identical with the same Content-Type',
      async (kind) => {
        const { first, replay } = await twice(`${test.url}/binary/${kind}`);
        expect(first.status).toBe(200);
        expect(replay).toEqual({ ...first, replayed: 'true' });
      },
    );

    it('sends a Uint8Array as the platform does (Fastify: the bytes; Express: JSON), and replays that', async () => {
      const { first, replay } = await twice(`${test.url}/binary/uint8`);
      const text = Buffer.from(replay.bytes, 'base64');
      if (platform === 'fastify') expect([...text]).toEqual([0, 1, 2, 250]);
      else expect(JSON.parse(text.toString())).toEqual({ 0: 0, 1: 1, 2: 2, 3: 250 });
      expect(replay.type).toBe(first.type);
    });

    it('stores a StreamableFile and replays it without running the handler again', async () => {
      const before = runs.get(`file-${platform}`) ?? 0;
      const { first, replay } = await twice(`${test.url}/binary/file`);
      expect(Buffer.from(first.bytes, 'base64').toString()).toBe('streamed bytes');
      expect(replay.disposition).toBe('attachment; filename="report.csv"');
      expect(replay.type).toMatch(/^text\/csv/);
      expect(runs.get(`file-${platform}`)).toBe(before + 1);
      const items = await scanTable(client, test.tableName);
      const files = items.filter(({ item }) => item.pk.startsWith('POST /binary/file#'));
      expect(files.map(({ item }) => item.status)).toEqual(files.map(() => 'COMPLETED'));
      expect(files).toHaveLength(runs.get(`file-${platform}`)!);
    });
  });

  describe('@Res({ passthrough: true })', () => {
    @Controller('passthrough')
    class PassthroughController {
      @Post()
      @Idempotent()
      create(@Res({ passthrough: true }) res: any) {
        ran(`passthrough-${platform}`);
        (res.code ?? res.status).call(res, 202);
        (res.header ?? res.setHeader).call(res, 'Location', `/jobs/${runs.get(`passthrough-${platform}`)}`);
        return { queued: true };
      }
    }

    it('stores and replays the status and headers set on the response object', async () => {
      const test = await open(platform, [PassthroughController]);
      const { first, replay } = await twice(`${test.url}/passthrough`);
      expect(first).toMatchObject({ status: 202, location: expect.stringMatching(/^\/jobs\/\d+$/) });
      expect(replay).toEqual({ ...first, replayed: 'true' });
    });

    @Controller('sent-by-handler')
    class SentByHandlerController {
      @Post()
      @Idempotent()
      create(@Res({ passthrough: true }) res: any) {
        const run = ran(`sent-${platform}`);
        // The Express habit: the handler sends the body itself and returns nothing.
        (res.code ?? res.status).call(res, 200);
        (res.json ?? res.send).call(res, { id: `ord_${run}` });
      }
    }

    it('a response the handler sent itself is never replayed empty: duplicates get 409 response-not-stored, logged once per route', async () => {
      const logs = new CapturedLogs();
      logs.start();
      try {
        const test = await open(platform, [SentByHandlerController]);
        const key = newKey();
        const send = () =>
          fetch(`${test.url}/sent-by-handler`, { method: 'POST', headers: { 'Idempotency-Key': key } });
        const first = await send();
        expect(first.status).toBe(200);
        expect(await first.json()).toEqual({ id: `ord_${runs.get(`sent-${platform}`)}` });
        // The client had its answer before the outcome was stored (the handler sent it): a duplicate that quick is in
        // flight. Once stored, every duplicate gets response-not-stored, never an empty 200.
        const settled = async () => {
          for (let attempt = 0; ; attempt++) {
            const duplicate = await send();
            const problem = {
              status: duplicate.status,
              ...((await duplicate.json()) as { type: string; detail: string }),
            };
            if (problem.type !== ProblemType.inFlight || attempt === 50) return problem;
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        };
        for (const duplicate of [await settled(), await settled()]) {
          expect(duplicate).toMatchObject({ status: 409, type: ProblemType.responseNotStored });
          // Said by its reason, never "too large".
          expect(duplicate.detail).toContain('the handler sent it itself (@Res())');
        }
        expect(runs.get(`sent-${platform}`)).toBe(1);
        await fetch(`${test.url}/sent-by-handler`, { method: 'POST', headers: { 'Idempotency-Key': newKey() } });
        const why = logs.at('warn').filter((entry) => JSON.stringify(entry).includes('sent the response itself'));
        expect(why).toHaveLength(1);
        expect(JSON.stringify(why[0])).toContain('POST /sent-by-handler');
      } finally {
        logs.stop();
      }
    });
  });

  describe('a result that cannot be stored', () => {
    @Controller('unstorable')
    class UnstorableController {
      @Post()
      @Idempotent()
      @Header('content-type', 'application/json')
      create() {
        ran(`unstorable-${platform}`);
        return { amount: BigInt(10) };
      }
    }

    it('is recorded as done without a body: the handler never runs again, duplicates get 409 response-not-stored', async () => {
      const test = await open(platform, [UnstorableController]);
      const key = newKey();
      const send = () => fetch(`${test.url}/unstorable`, { method: 'POST', headers: { 'Idempotency-Key': key } });
      await send(); // the platform cannot send it either: that first answer is the platform's error
      const duplicate = await send();
      expect(duplicate.status).toBe(409);
      const problem = (await duplicate.json()) as { detail: string };
      expect(problem).toMatchObject({ type: ProblemType.responseNotStored });
      expect(problem.detail).toContain('it cannot be written as JSON');
      expect(problem.detail).not.toContain('too large');
      expect(runs.get(`unstorable-${platform}`)).toBe(1);
      const items = await scanTable(client, test.tableName);
      expect(items.map(({ item }) => item.status)).toEqual(['COMPLETED']);
    });
  });

  describe('API versioning: each version has its own records', () => {
    @Controller('orders')
    class VersionedOrdersController {
      @Post()
      @Version('1')
      @Idempotent()
      v1() {
        return { version: 1, run: ran(`v1-${platform}`) };
      }

      @Post()
      @Version('2')
      @Idempotent()
      v2() {
        return { version: 2, run: ran(`v2-${platform}`) };
      }
    }

    @Controller('quotes')
    class MultiVersionController {
      @Post()
      @Version(['3', '4', VERSION_NEUTRAL])
      @Idempotent()
      quote() {
        return { run: ran(`quote-${platform}`) };
      }
    }

    const cases: Array<[string, VersioningOptions, (v: string) => { path: string; headers: Record<string, string> }]> =
      [
        ['URI', { type: VersioningType.URI }, (v) => ({ path: `/v${v}`, headers: {} })],
        [
          'header',
          { type: VersioningType.HEADER, header: 'X-API-Version' },
          (v) => ({ path: '', headers: { 'X-API-Version': v } }),
        ],
        [
          'media type',
          { type: VersioningType.MEDIA_TYPE, key: 'v=' },
          (v) => ({ path: '', headers: { accept: `application/json;v=${v}` } }),
        ],
        [
          'custom',
          { type: VersioningType.CUSTOM, extractor: (request: any) => String(request.headers['x-version'] ?? '') },
          (v) => ({ path: '', headers: { 'x-version': v } }),
        ],
      ];

    it.each(cases)(
      '%s versioning: the same key on v1 and v2 runs each version once and replays each its own',
      async (_name, versioning, request) => {
        const test = await open(platform, [VersionedOrdersController, MultiVersionController], (app) =>
          app.enableVersioning(versioning),
        );
        const key = newKey();
        const send = async (version: string, resource = 'orders') => {
          const { path, headers } = request(version);
          return post(`${test.url}${path}/${resource}`, {}, { 'Idempotency-Key': key, ...headers });
        };
        const v1 = await send('1');
        const v2 = await send('2');
        expect(JSON.parse(v1.text)).toMatchObject({ version: 1 });
        expect(JSON.parse(v2.text)).toMatchObject({ version: 2 });
        const v1Again = await send('1');
        const v2Again = await send('2');
        expect(v1Again.text).toBe(v1.text);
        expect(v2Again.text).toBe(v2.text);
        expect(v2Again.headers.get('idempotent-replayed')).toBe('true');

        // One handler serving several versions: the version the request asked for tells them apart.
        const quote3 = await send('3', 'quotes');
        const quote4 = await send('4', 'quotes');
        expect(quote3.status).toBe(201);
        expect(quote4.text).not.toBe(quote3.text);
        expect((await send('4', 'quotes')).text).toBe(quote4.text);
      },
    );
  });
});
