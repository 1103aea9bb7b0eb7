import { INestApplication, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpStrategy, StreamableHttpTransport } from '@rekog/mcp-nest';
import { IdempotencyModule, IdempotencyModuleOptions } from 'nestjs-dynamodb-idempotency';

/**
 * An MCP server in this process: a NestJS app with the module (`options`, the replay cache off) and `controllers`
 * (`@McpController`s), served over Streamable HTTP at `/mcp` by `@rekog/mcp-nest`; the `x-user` header becomes the
 * caller's principal (`req.user`), as an authentication guard would set it.
 */
export async function startMcpApp(options: IdempotencyModuleOptions, controllers: Type[]): Promise<INestApplication> {
  const app = await NestFactory.create(
    {
      module: class McpTestModule {},
      imports: [IdempotencyModule.forRoot({ ...options, replayCache: { enabled: false } })],
      controllers,
    },
    { logger: false },
  );
  app.use((request: { headers: Record<string, string>; user?: unknown }, _response: unknown, next: () => void) => {
    if (request.headers['x-user']) request.user = { sub: request.headers['x-user'] };
    next();
  });
  const mcp = new McpStrategy({ name: 'test', version: '1.0.0', transports: [new StreamableHttpTransport()] });
  mcp.setHttpAdapter(app.getHttpAdapter());
  app.connectMicroservice({ strategy: mcp });
  await app.startAllMicroservices();
  await app.listen(0, '127.0.0.1');
  return app;
}

/** The official MCP client connected to `app`'s `/mcp`, sending `headers` with every request. */
export async function mcpClient(app: INestApplication, headers: Record<string, string> = {}): Promise<Client> {
  const { port } = app.getHttpServer().address() as { port: number };
  const client = new Client({ name: 'test-agent', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers } }),
  );
  return client;
}
