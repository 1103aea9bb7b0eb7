import { request } from 'node:http';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Controller, Headers, Post, Res } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { Platform, PLATFORMS, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';
import { readRecord } from './records';

/**
 * Replays never carry what belongs to one response: headers such as set-cookie in replayHeaders fail startup, and a
 * header sent more than once is stored and replayed as its separate values. Two instances, replay cache off.
 */

@Controller('links')
class LinksController {
  @Post()
  @Idempotent()
  create(@Headers('idempotency-key') key: string, @Res({ passthrough: true }) response: any) {
    const links = ['</orders/1>; rel="self"', '</orders/1/items>; rel="items"'];
    if (typeof response.append === 'function')
      for (const link of links) response.append('Link', link); // Express
    else response.header('link', links); // Fastify: several values at once
    response.header('vary', ['Accept', 'Accept-Language']);
    response.header('set-cookie', `session=${key}; HttpOnly`);
    return { key };
  }
}

/** The header lines of a POST, as they came over the wire (`rawHeaders` keeps repeated lines apart). */
function rawPost(url: string, key: string): Promise<{ status: number; lines: [string, string][] }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(`${url}/links`, { method: 'POST', headers: { 'idempotency-key': key } }, (response) => {
      const lines: [string, string][] = [];
      for (let i = 0; i < response.rawHeaders.length; i += 2)
        lines.push([response.rawHeaders[i].toLowerCase(), response.rawHeaders[i + 1]]);
      response.resume().on('end', () => resolve({ status: response.statusCode!, lines }));
    });
    outgoing.on('error', reject).end();
  });
}

describe.each(PLATFORMS)('replayed headers on %s', (platform: Platform) => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let tableName: string;
  let a: TestApp;
  let b: TestApp;
  let keys = 0;

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    tableName = uniqueTableName('headers');
    await createIdempotencyTable(client, tableName);
    const boot = () =>
      startApp(platform, {
        imports: [
          IdempotencyModule.forRoot({
            client,
            tableName,
            replayCache: { enabled: false },
            replayHeaders: ['content-type', 'link', 'vary'],
          }),
        ],
        controllers: [LinksController],
      });
    [a, b] = [await boot(), await boot()];
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await dynamo.stop();
  });

  it('stores a header sent more than once as its values, and replays them as separate header lines', async () => {
    const key = `links-${platform}-${++keys}`;
    const first = await rawPost(a.url, key);
    expect(first.status).toBe(201);
    const record = await readRecord(client, tableName, 'POST /links', key);
    expect(record?.response?.headers).toMatchObject({
      link: ['</orders/1>; rel="self"', '</orders/1/items>; rel="items"'],
      vary: expect.arrayContaining(['Accept']),
    });
    expect(record?.response?.headers).not.toHaveProperty('set-cookie');

    const replay = await rawPost(b.url, key);
    expect(replay.lines).toContainEqual(['idempotent-replayed', 'true']);
    const values = (name: string, lines: [string, string][]) =>
      lines.filter(([header]) => header === name).map(([, value]) => value);
    expect(values('link', replay.lines)).toEqual(values('link', first.lines));
    expect(values('link', replay.lines)).toHaveLength(2);
    expect(values('vary', replay.lines).join(', ')).toBe(values('vary', first.lines).join(', '));
    expect(values('set-cookie', first.lines)).toHaveLength(1); // the first caller gets its cookie …
    expect(values('set-cookie', replay.lines)).toEqual([]); // … and nobody replaying the key does
  });

  it.each([
    'set-cookie',
    'Authorization',
    'proxy-authenticate',
    'WWW-Authenticate',
    'connection',
    'keep-alive',
    'transfer-encoding',
    'content-length',
    'upgrade',
    'te',
    'trailer',
  ])('fails startup naming %s when replayHeaders includes it', async (header) => {
    await expect(
      startApp(platform, {
        imports: [IdempotencyModule.forRoot({ client, tableName, replayHeaders: ['content-type', header] })],
        controllers: [LinksController],
      }),
    ).rejects.toThrow(new RegExp(`replayHeaders may not include ${header.toLowerCase()}`));
  });
});
