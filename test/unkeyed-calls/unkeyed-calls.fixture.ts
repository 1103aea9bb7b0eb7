import { request as httpRequest, createServer, IncomingMessage, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { DeleteItemCommand, DynamoDBClient, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { Body, Controller, Inject, Post } from '@nestjs/common';
import axios from 'axios';
import { Idempotent, IdempotencyContext, IdempotencyService } from 'nestjs-dynamodb-idempotency';
import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';

/** A downstream service that answers 201 and remembers every request it received (method, path, key). */
export class Downstream {
  readonly received: { method: string; path: string; key?: string }[] = [];
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((request: IncomingMessage, response) => {
      const key = request.headers['idempotency-key'] as string | undefined;
      this.received.push({ method: request.method!, path: request.url!, key });
      request.resume().on('end', () => response.writeHead(201, { 'content-type': 'application/json' }).end('{}'));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

export const DOWNSTREAM = Symbol('DOWNSTREAM');
export const CLIENTS = Symbol('CLIENTS');

/** The DynamoDB clients a handler writes with: the module's own, and one of the application's (`other`). */
export interface Clients {
  module: DynamoDBClient;
  other: DynamoDBClient;
  table: string;
}

/** A write a handler sends: through which client, which operation (a document client puts), on which table. */
export interface DynamoDbWrite {
  client: 'module' | 'other' | 'document';
  op: 'PutItem' | 'UpdateItem' | 'DeleteItem';
  id: string;
  conditional?: boolean;
  /** Another table than the app's orders table (a target no other test reports). */
  table?: string;
}

/** How a handler calls out: the transport, whether with a key, and the method. */
export interface CallOut {
  via: 'fetch' | 'http' | 'axios' | 'client';
  keyed?: boolean;
  method?: string;
  /** Another downstream's base URL (a target no other test reports). */
  url?: string;
}

/** What a handler's outgoing call ended with: a status, or the error's name and message (the cause's, for fetch). */
type Ended = { status: number } | { error: string; message: string };

async function ended(call: () => Promise<number>): Promise<Ended> {
  try {
    return { status: await call() };
  } catch (error) {
    const cause = (error as { cause?: unknown }).cause ?? error;
    return { error: (cause as Error).name, message: (cause as Error).message };
  }
}

function nodeHttp(url: string, method: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method, headers }, (response) => {
      response.resume().on('end', () => resolve(response.statusCode!));
    });
    request.on('error', reject);
    request.end(hasBody(method) ? '{}' : undefined);
  });
}

const hasBody = (method: string) => !['GET', 'HEAD', 'OPTIONS'].includes(method);

/**
 * Handlers that send side effects: HTTP requests through `fetch`, `node:http`, axios or the retrying client, and
 * DynamoDB writes through the module's client or another one. `/outside` does the same without protection.
 */
@Controller('calls')
export class CallsController {
  private readonly client = createIdempotentClient();

  constructor(
    @Inject(DOWNSTREAM) private readonly downstream: Downstream,
    @Inject(CLIENTS) private readonly clients: Clients,
    private readonly context: IdempotencyContext,
    private readonly service: IdempotencyService,
  ) {}

  @Post('http')
  @Idempotent()
  http(@Body() body: CallOut) {
    return this.callOut(body);
  }

  @Post('outside')
  outside(@Body() body: CallOut) {
    return this.callOut(body);
  }

  @Post('execute')
  execute(@Body() body: CallOut & { key: string }) {
    return this.service.execute({ operation: 'call-out', key: body.key }, () => this.callOut(body));
  }

  @Post('dynamodb')
  @Idempotent()
  dynamodb(@Body() body: DynamoDbWrite) {
    const table = body.table ?? this.clients.table;
    const condition = body.conditional ? { ConditionExpression: 'attribute_not_exists(id)' } : {};
    const key = { id: { S: body.id } };
    const commands = {
      PutItem: () => new PutItemCommand({ TableName: table, Item: key, ...condition }),
      UpdateItem: () =>
        new UpdateItemCommand({
          TableName: table,
          Key: key,
          UpdateExpression: 'SET n = :n',
          ExpressionAttributeValues: { ':n': { N: '1' } },
          ...condition,
        }),
      DeleteItem: () => new DeleteItemCommand({ TableName: table, Key: key, ...condition }),
    };
    return ended(async () => {
      if (body.client === 'document') {
        const documents = DynamoDBDocumentClient.from(this.clients.module);
        await documents.send(new PutCommand({ TableName: table, Item: { id: body.id }, ...condition }));
      } else {
        await this.clients[body.client].send(commands[body.op]() as PutItemCommand);
      }
      return 200;
    });
  }

  /** An unconditional put given to `commitWith` (sent by the module with the completion), or sent by the handler. */
  @Post('commit')
  @Idempotent()
  commit(@Body() body: { id: string; direct?: boolean }) {
    const item = { TableName: this.clients.table, Item: { id: { S: body.id } } };
    if (!body.direct) {
      this.context.commitWith({ Put: { TableName: this.clients.table, Item: { id: body.id } } });
      return { status: 200 };
    }
    return ended(async () => {
      await this.clients.module.send(new PutItemCommand(item));
      return 200;
    });
  }

  private callOut({ via, keyed, method = 'POST', url: base = this.downstream.url }: CallOut): Promise<Ended> {
    const url = `${base}/charges`;
    const headers: Record<string, string> =
      keyed && via !== 'client' ? { 'Idempotency-Key': this.context.deriveKey('charge') } : {};
    if (via === 'fetch')
      return ended(
        async () => (await fetch(url, { method, headers, body: hasBody(method) ? '{}' : undefined })).status,
      );
    if (via === 'http') return ended(() => nodeHttp(url, method, headers));
    if (via === 'axios')
      return ended(
        async () => (await axios.request({ url, method, headers, data: hasBody(method) ? {} : undefined })).status,
      );
    return ended(async () => (await this.client.request(method, url, { name: 'charge', body: {} })).status);
  }
}
