import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  NestInterceptor,
  Post,
  Req,
  UploadedFile,
  UploadedFiles,
  UseInterceptors,
} from '@nestjs/common';
import { from, Observable, switchMap } from 'rxjs';
import {
  AnyFilesInterceptor,
  FileFieldsInterceptor,
  FileInterceptor,
  FilesInterceptor,
  NestExpressApplication,
} from '@nestjs/platform-express';
import fastifyMultipart from '@fastify/multipart';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Idempotent, IdempotencyModule, ProblemType } from 'nestjs-dynamodb-idempotency';
import { startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { CapturedLogs } from '../support/logs';
import { RunsByKey } from '../support/runs-by-key';
import { createIdempotencyTable } from '../support/table';

// multer ships no types; the test calls its single() middleware only.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const multer = require('multer') as () => {
  single(field: string): (req: unknown, res: unknown, done: (error?: unknown) => void) => void;
};

/**
 * Everything the handler can read is in the fingerprint, or the request is refused: uploaded files (multer on Express
 * in each of its shapes, memory and disk storage; @fastify/multipart with attachFieldsToBody on Fastify), and bodies
 * no parser read (text/plain, application/octet-stream without a parser, streamed multipart). Two instances on one
 * table, replay cache off: every 422 and replay is decided from DynamoDB.
 */
let dynamo: Dynalite;
let client: DynamoDBClient;
beforeAll(async () => {
  dynamo = await startDynalite();
  client = localClient(dynamo.endpoint);
});
afterAll(() => dynamo.stop());

let keys = 0;
const newKey = () => `upload-${++keys}`;
const uploadDir = mkdtempSync(join(tmpdir(), 'idempotency-uploads-'));

type File = { fieldname: string; originalname: string; size: number };
const described = (file: File) => `${file.fieldname}:${file.originalname}:${file.size}`;

@Controller('express')
class ExpressUploads {
  constructor(private readonly runs: RunsByKey) {}

  @Post('single')
  @Idempotent()
  @UseInterceptors(FileInterceptor('file'))
  single(@UploadedFile() file: File, @Body() body: { note?: string }, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { file: described(file), note: body.note };
  }

  /** A chosen fingerprint that leaves the whole request out: the file's digest still tells two uploads apart. */
  @Post('chosen')
  @Idempotent({ fingerprint: () => 'every request is the same' })
  @UseInterceptors(FileInterceptor('file'))
  chosen(@UploadedFile() file: File, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { file: described(file) };
  }

  @Post('disk')
  @Idempotent()
  @UseInterceptors(FileInterceptor('file', { dest: uploadDir }))
  disk(@UploadedFile() file: File, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { file: described(file) };
  }

  @Post('many')
  @Idempotent()
  @UseInterceptors(FilesInterceptor('files'))
  many(@UploadedFiles() files: File[], @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { files: files.map(described) };
  }

  @Post('fields')
  @Idempotent()
  @UseInterceptors(FileFieldsInterceptor([{ name: 'front' }, { name: 'back' }]))
  fields(@UploadedFiles() files: Record<string, File[]>, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { files: Object.values(files).flat().map(described) };
  }

  @Post('any')
  @Idempotent()
  @UseInterceptors(AnyFilesInterceptor())
  any(@UploadedFiles() files: File[], @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { files: files.map(described) };
  }

  @Post('text')
  @Idempotent()
  text(@Body() body: unknown, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { body: Buffer.isBuffer(body) ? body.toString('base64') : body };
  }
}

/** The upload interceptor bound inside @Idempotent(): the fingerprint would be taken before the files are read. */
@Controller('misordered')
class MisorderedUpload {
  @Post()
  @UseInterceptors(FileInterceptor('file'))
  @Idempotent()
  upload(@UploadedFile() file: File) {
    return { file: described(file) };
  }
}

/** An upload interceptor of the application's own, which the startup check cannot recognise. */
class OwnUploadInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const read = new Promise<void>((resolve, reject) =>
      multer().single('file')(http.getRequest(), http.getResponse(), (error: unknown) =>
        error ? reject(error) : resolve(),
      ),
    );
    return from(read).pipe(switchMap(() => next.handle()));
  }
}

@Controller('own-upload')
class OwnUploadInside {
  constructor(private readonly runs: RunsByKey) {}

  @Post()
  @UseInterceptors(OwnUploadInterceptor)
  @Idempotent()
  upload(@UploadedFile() file: File, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { file: described(file) };
  }
}

@Controller('fastify')
class FastifyUploads {
  constructor(private readonly runs: RunsByKey) {}

  @Post('attached')
  @Idempotent()
  attached(@Body() body: Record<string, any>, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { file: `${body.file.fieldname}:${body.file.filename}:${body.file._buf.length}`, note: body.note?.value };
  }

  @Post('text')
  @Idempotent()
  text(@Body() body: unknown, @Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    return { body };
  }
}

@Controller('streamed')
class StreamedUpload {
  constructor(private readonly runs: RunsByKey) {}

  /** The handler reads the multipart stream itself: nothing parsed it before the fingerprint. */
  @Post()
  @Idempotent()
  async streamed(@Req() request: any) {
    this.runs.count(request.headers['idempotency-key']);
    const file = await request.file();
    return { file: file.filename, size: (await file.toBuffer()).length };
  }
}

function form(parts: Record<string, string | { name: string; bytes: string; type?: string }>): FormData {
  const data = new FormData();
  for (const [field, value] of Object.entries(parts)) {
    if (typeof value === 'string') data.append(field, value);
    else data.append(field, new Blob([value.bytes], { type: value.type ?? 'text/plain' }), value.name);
  }
  return data;
}

async function send(url: string, key: string, body: FormData | string | Buffer, contentType?: string) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'idempotency-key': key, ...(contentType ? { 'content-type': contentType } : {}) },
    body,
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    type: response.headers.get('content-type'),
    text: await response.text(),
  };
}

describe('uploads and unparsed bodies on Express', () => {
  let tableName: string;
  let a: TestApp;
  let b: TestApp;
  const logs = new CapturedLogs();
  const boot = (rawBodyParsers: boolean) =>
    startApp(
      'express',
      {
        imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false } })],
        controllers: [ExpressUploads, OwnUploadInside],
        providers: [RunsByKey],
      },
      {
        rawBody: true,
        configure: (app) => {
          if (!rawBodyParsers) return;
          (app as NestExpressApplication).useBodyParser('text');
          (app as NestExpressApplication).useBodyParser('raw');
        },
      },
    );

  beforeAll(async () => {
    tableName = uniqueTableName('uploads');
    await createIdempotencyTable(client, tableName);
    [a, b] = [await boot(false), await boot(false)];
    logs.start();
  });
  afterAll(async () => {
    logs.stop();
    await a.close();
    await b.close();
  });

  const file = (bytes: string, name = 'receipt.txt') => ({ name, bytes });

  it.each([
    ['single (memory storage)', '/express/single', (bytes: string) => form({ file: file(bytes), note: 'n' })],
    ['single (disk storage)', '/express/disk', (bytes: string) => form({ file: file(bytes) })],
    ['an array of files', '/express/many', (bytes: string) => form({ files: file(bytes) })],
    ['named fields', '/express/fields', (bytes: string) => form({ front: file('front'), back: file(bytes) })],
    ['any files', '/express/any', (bytes: string) => form({ x: file(bytes) })],
    [
      'a route with a chosen fingerprint (files stay in it)',
      '/express/chosen',
      (bytes: string) => form({ file: file(bytes) }),
    ],
  ])('%s: the same file replays, another file with the same name and size is a 422', async (_shape, path, body) => {
    const key = newKey();
    const first = await send(`${a.url}${path}`, key, body('abcd'));
    expect(first.status).toBe(201);
    const replay = await send(`${b.url}${path}`, key, body('abcd'));
    expect(replay).toMatchObject({ status: 201, replayed: 'true', text: first.text });
    const other = await send(`${b.url}${path}`, key, body('abce'));
    expect(other.status).toBe(422);
    expect(JSON.parse(other.text).type).toBe(ProblemType.fingerprintMismatch);
    expect(RunsByKey.of(key)).toBe(1);
  });

  it('a file of another MIME type or original name is another request', async () => {
    const key = newKey();
    await send(`${a.url}/express/single`, key, form({ file: { name: 'a.txt', bytes: 'same' } }));
    expect((await send(`${b.url}/express/single`, key, form({ file: { name: 'b.txt', bytes: 'same' } }))).status).toBe(
      422,
    );
    expect(
      (await send(`${b.url}/express/single`, key, form({ file: { name: 'a.txt', bytes: 'same', type: 'image/png' } })))
        .status,
    ).toBe(422);
    expect(RunsByKey.of(key)).toBe(1);
  });

  it('the text fields beside the file are in the fingerprint', async () => {
    const key = newKey();
    await send(`${a.url}/express/single`, key, form({ file: file('x'), note: 'first' }));
    expect((await send(`${b.url}/express/single`, key, form({ file: file('x'), note: 'second' }))).status).toBe(422);
  });

  it.each([
    ['text/plain', 'hello'],
    ['application/octet-stream', Buffer.from([1, 2, 3])],
  ])(
    'a %s body that no parser read is refused with 415 body-unreadable, and the handler does not run',
    async (type, body) => {
      const key = newKey();
      const refused = await send(`${a.url}/express/text`, key, body, type);
      expect(refused.status).toBe(415);
      expect(refused.type).toMatch(/^application\/problem\+json/);
      const problem = JSON.parse(refused.text);
      expect(problem).toMatchObject({ type: ProblemType.bodyUnreadable, status: 415 });
      // The client is told its body was not read; the route's missing parser and the fix go to the log only.
      expect(problem.detail).not.toMatch(/useBodyParser|parser|express\/text/);
      expect(RunsByKey.of(key)).toBe(0);
      // Logged (once for the route, by whichever request came first).
      const logged = logs.at('warn').filter((entry) => JSON.stringify(entry).includes('body-unreadable'));
      expect(JSON.stringify(logged)).toMatch(/POST \/express\/text[\s\S]*useBodyParser/);
      // Never a replay of a different body: the key was not even claimed.
      expect((await send(`${b.url}/express/text`, key, body, type)).status).toBe(415);
    },
  );

  it('logs a route that cannot read a body once, however often it is refused', async () => {
    const unreadable = () => logs.at('warn').filter((entry) => JSON.stringify(entry).includes('body-unreadable'));
    await send(`${a.url}/express/text`, newKey(), 'hello', 'text/plain');
    const before = unreadable().length;
    for (let i = 0; i < 3; i++) await send(`${a.url}/express/text`, newKey(), 'hello', 'text/plain');
    expect(unreadable().length).toBe(before);
  });

  it('with the text and raw parsers enabled, such bodies are fingerprinted: same replays, different is a 422', async () => {
    const [c, d] = [await boot(true), await boot(true)];
    try {
      for (const [type, same, other] of [
        ['text/plain', 'hello', 'hellp'],
        ['application/octet-stream', Buffer.from([1, 2, 3]), Buffer.from([1, 2, 4])],
      ] as const) {
        const key = newKey();
        const first = await send(`${c.url}/express/text`, key, same, type);
        expect(first.status).toBe(201);
        expect(await send(`${d.url}/express/text`, key, same, type)).toMatchObject({
          status: 201,
          replayed: 'true',
          text: first.text,
        });
        expect((await send(`${d.url}/express/text`, key, other, type)).status).toBe(422);
        expect(RunsByKey.of(key)).toBe(1);
      }
    } finally {
      await c.close();
      await d.close();
    }
  });

  it('an upload interceptor of its own inside @Idempotent() leaves the body unread: 415 body-unreadable, never a replay', async () => {
    const key = newKey();
    const refused = await send(`${a.url}/own-upload`, key, form({ file: file('abcd') }));
    expect(refused.status).toBe(415);
    expect(JSON.parse(refused.text).type).toBe(ProblemType.bodyUnreadable);
    expect(RunsByKey.of(key)).toBe(0);
  });

  it('a JSON body is fingerprinted parsed, with rawBody: true too: key order and spacing do not matter', async () => {
    const key = newKey();
    const first = await send(`${a.url}/express/text`, key, '{"a":1,"b":[1,2]}', 'application/json');
    expect(first.status).toBe(201);
    const reordered = await send(`${b.url}/express/text`, key, '{ "b": [1, 2],\n  "a": 1 }', 'application/json');
    expect(reordered).toMatchObject({ status: 201, replayed: 'true', text: first.text });
    expect((await send(`${b.url}/express/text`, key, '{"a":2,"b":[1,2]}', 'application/json')).status).toBe(422);
  });

  it('fails startup naming the handler when an upload interceptor is bound inside @Idempotent()', async () => {
    await expect(
      startApp('express', {
        imports: [IdempotencyModule.forRoot({ client, tableName })],
        controllers: [MisorderedUpload],
      }),
    ).rejects.toThrow(/MisorderedUpload\.upload: .*upload interceptor.*inside @Idempotent\(\)/);
  });
});

describe('uploads and unparsed bodies on Fastify', () => {
  let tableName: string;
  let a: TestApp;
  let b: TestApp;
  const boot = (attachFieldsToBody: boolean) =>
    startApp(
      'fastify',
      {
        imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false } })],
        controllers: attachFieldsToBody ? [FastifyUploads] : [StreamedUpload],
        providers: [RunsByKey],
      },
      {
        configure: (app) =>
          void (app as NestFastifyApplication).register(
            fastifyMultipart,
            attachFieldsToBody ? { attachFieldsToBody: true } : {},
          ),
      },
    );

  beforeAll(async () => {
    tableName = uniqueTableName('uploads');
    await createIdempotencyTable(client, tableName);
    [a, b] = [await boot(true), await boot(true)];
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('@fastify/multipart with attachFieldsToBody: the same file replays, another one is a 422', async () => {
    const key = newKey();
    const upload = (bytes: string, note = 'n') => form({ file: { name: 'receipt.txt', bytes }, note });
    const first = await send(`${a.url}/fastify/attached`, key, upload('abcd'));
    expect(first.status).toBe(201);
    expect(JSON.parse(first.text)).toEqual({ file: 'file:receipt.txt:4', note: 'n' });
    expect(await send(`${b.url}/fastify/attached`, key, upload('abcd'))).toMatchObject({
      status: 201,
      replayed: 'true',
      text: first.text,
    });
    expect((await send(`${b.url}/fastify/attached`, key, upload('abce'))).status).toBe(422);
    expect((await send(`${b.url}/fastify/attached`, key, upload('abcd', 'other'))).status).toBe(422);
    expect(RunsByKey.of(key)).toBe(1);
  });

  it('a text/plain body (parsed by Fastify) is fingerprinted', async () => {
    const key = newKey();
    const first = await send(`${a.url}/fastify/text`, key, 'hello', 'text/plain');
    expect(first.status).toBe(201);
    expect((await send(`${b.url}/fastify/text`, key, 'hello', 'text/plain')).replayed).toBe('true');
    expect((await send(`${b.url}/fastify/text`, key, 'hellp', 'text/plain')).status).toBe(422);
  });

  it('a multipart body the handler streams itself is refused with 415 body-unreadable before the handler runs', async () => {
    const streamed = await boot(false);
    try {
      const key = newKey();
      const refused = await send(`${streamed.url}/streamed`, key, form({ file: { name: 'a.txt', bytes: 'abc' } }));
      expect(refused.status).toBe(415);
      expect(JSON.parse(refused.text).type).toBe(ProblemType.bodyUnreadable);
      expect(RunsByKey.of(key)).toBe(0);
    } finally {
      await streamed.close();
    }
  });
});
