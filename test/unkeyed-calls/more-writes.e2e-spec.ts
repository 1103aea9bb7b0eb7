import { connect, createServer, Http2Server } from 'node:http2';
import { createServer as createHttpServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import {
  BatchExecuteStatementCommand,
  BatchWriteItemCommand,
  DynamoDBClient,
  ExecuteStatementCommand,
  ExecuteTransactionCommand,
  GetItemCommand,
  PutItemCommand,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, ExecuteStatementCommand as DocumentExecuteStatement } from '@aws-sdk/lib-dynamodb';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IdempotencyModule, IdempotencyService, UnkeyedCallError } from 'nestjs-dynamodb-idempotency';
import { localClient, uniqueTableName } from '../support/dynalite';
import { describeOnDynamoDbLocal, startStore } from '../support/engines';
import { createIdempotencyTable, createTableWithKey } from '../support/table';

/**
 * The unkeyed-call watch in `'error'` mode over the writes and requests its first version missed: `BatchWriteItem`, a
 * transaction's unconditional action, PartiQL `INSERT`/`UPDATE`/`DELETE`, `node:http2`; and a provider's own key header named
 * in `downstreamKeyHeaders`. On DynamoDB Local (transactions and PartiQL), inside `IdempotencyService.execute()`.
 */
describeOnDynamoDbLocal("unkeyedCalls: 'error' over batches, transactions, PartiQL and http2", () => {
  let client: DynamoDBClient;
  let context: INestApplicationContext;
  let service: IdempotencyService;
  let table: string;
  let keys = 0;
  const newKey = () => `more-writes-${process.pid}-${++keys}`;

  beforeAll(async () => {
    const { endpoint } = await startStore('dynamodb-local');
    client = localClient(endpoint);
    const tableName = uniqueTableName('morewrites');
    table = uniqueTableName('orders');
    await createIdempotencyTable(client, tableName);
    await createTableWithKey(client, table);
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          client,
          tableName,
          unkeyedCalls: 'error',
          replayCache: { enabled: false },
          downstreamKeyHeaders: ['PayPal-Request-Id'],
        }),
      ],
    }).compile();
    context = await moduleRef.init();
    service = context.get(IdempotencyService);
  });
  afterAll(() => context.close());

  /** Sends `command` inside a protected call; what it ended with. */
  const inCall = (send: () => Promise<unknown>) =>
    service.execute({ operation: 'writes', key: newKey() }, async () => {
      await send();
      return 'sent';
    });
  const stored = async (id: string) =>
    (await client.send(new GetItemCommand({ TableName: table, Key: { id: { S: id } }, ConsistentRead: true }))).Item;

  it('refuses a BatchWriteItem (it takes no conditions) before it is sent', async () => {
    const id = newKey();
    const batch = new BatchWriteItemCommand({
      RequestItems: { [table]: [{ PutRequest: { Item: { id: { S: id } } } }] },
    });
    await expect(inCall(() => client.send(batch))).rejects.toThrow(UnkeyedCallError);
    await expect(inCall(() => client.send(batch))).rejects.toThrow(`sent BatchWriteItem to table ${table}`);
    expect(await stored(id)).toBeUndefined();
  });

  it('refuses a transaction with an unconditional action, and lets one whose every write is conditioned go', async () => {
    const [id, other] = [newKey(), newKey()];
    const put = (key: string, conditional: boolean) => ({
      Put: {
        TableName: table,
        Item: { id: { S: key } },
        ...(conditional ? { ConditionExpression: 'attribute_not_exists(id)' } : {}),
      },
    });
    const mixed = new TransactWriteItemsCommand({ TransactItems: [put(id, true), put(other, false)] });
    await expect(inCall(() => client.send(mixed))).rejects.toThrow(`sent TransactWriteItems to table ${table}`);
    expect(await stored(id)).toBeUndefined();
    const conditioned = new TransactWriteItemsCommand({ TransactItems: [put(id, true), put(other, true)] });
    await expect(inCall(() => client.send(conditioned))).resolves.toBe('sent');
    expect(await stored(other)).toBeDefined();
  });

  it('refuses PartiQL INSERT, and UPDATE and DELETE by the key alone, through any of the three commands and the DocumentClient; lets a conditioned UPDATE go', async () => {
    const id = newKey();
    await client.send(new PutItemCommand({ TableName: table, Item: { id: { S: id }, n: { N: '1' } } }));
    const insert = `INSERT INTO "${table}" VALUE {'id': '${newKey()}', 'n': 1}`;
    const update = `UPDATE "${table}" SET n = 2 WHERE id = '${id}'`;
    const deleted = `delete from "${table}" where id = ?`;
    const documents = DynamoDBDocumentClient.from(client);
    for (const statement of [insert, update, deleted]) {
      for (const send of [
        () => client.send(new ExecuteStatementCommand({ Statement: statement, Parameters: [{ S: id }] })),
        () => client.send(new BatchExecuteStatementCommand({ Statements: [{ Statement: statement }] })),
        () => client.send(new ExecuteTransactionCommand({ TransactStatements: [{ Statement: statement }] })),
        () => documents.send(new DocumentExecuteStatement({ Statement: statement, Parameters: [id] })),
      ]) {
        await expect(inCall(send)).rejects.toThrow(UnkeyedCallError);
      }
    }
    expect((await stored(id))?.n).toEqual({ N: '1' });
    const conditioned = `UPDATE "${table}" SET n = 3 WHERE id = '${id}' AND n = 1`;
    await expect(inCall(() => client.send(new ExecuteStatementCommand({ Statement: conditioned })))).resolves.toBe(
      'sent',
    );
    expect((await stored(id))?.n).toEqual({ N: '3' });
  });

  describe('HTTP requests', () => {
    let server: Server;
    let url: string;
    const seen: string[] = [];
    beforeAll(async () => {
      server = createHttpServer((request, response) => {
        seen.push(String(request.headers['paypal-request-id']));
        request.resume().on('end', () => response.writeHead(201).end());
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise((resolve) => server.close(resolve)));

    it('lets a request keyed by a header named in downstreamKeyHeaders go (any letter case), and refuses one without', async () => {
      const send = (headers: Record<string, string>) =>
        inCall(async () => {
          const answer = await fetch(`${url}/orders`, { method: 'POST', headers, body: '{}' });
          if (answer.status !== 201) throw new Error(String(answer.status));
        });
      await expect(send({ 'paypal-request-id': 'pp-1' })).resolves.toBe('sent');
      await expect(send({ 'x-trace': 't' })).rejects.toThrow();
      expect(seen).toEqual(['pp-1']);
    });
  });

  // Node publishes http2 client streams on a diagnostics channel from 22.14 on; Node 20 has none (documented).
  const http2Channel = Number(process.versions.node.split('.')[0]) >= 22 ? it : it.skip;
  http2Channel('refuses a node:http2 POST without a key, and lets a keyed one go (Node 22 and later)', async () => {
    const bodies: string[] = []; // what each request's body brought
    const server: Http2Server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        bodies.push(body);
        response.writeHead(201).end();
      });
      request.on('aborted', () => bodies.push(`aborted: ${body}`));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const post = (headers: Record<string, string>) =>
      inCall(
        () =>
          new Promise<void>((resolve, reject) => {
            const stream = session.request({ ':method': 'POST', ':path': '/orders', ...headers });
            stream.on('error', reject);
            stream.on('response', () => stream.resume().on('end', resolve));
            stream.end('{}');
          }),
      );
    try {
      await expect(post({})).rejects.toThrow(UnkeyedCallError);
      await expect(post({ 'idempotency-key': 'k-1' })).resolves.toBe('sent');
      // The stream is reset as it is created: its headers may reach the server, its body never does.
      expect(bodies.filter((body) => body === '{}')).toHaveLength(1);
    } finally {
      session.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
