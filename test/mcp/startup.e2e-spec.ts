import { Test } from '@nestjs/testing';
import { McpController, Resource, Tool } from '@rekog/mcp-nest';
import { z } from 'zod';
import { Idempotent, IdempotencyModule, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';

/** What startup says of `@Idempotent()` on MCP handlers it cannot protect, or with options it cannot use. */
describe('@Idempotent() on MCP handlers, at startup', () => {
  const start = (controller: Function) =>
    Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ repository: new InMemoryIdempotencyRepository() })],
      controllers: [controller as never],
    })
      .compile()
      .then((moduleRef) => moduleRef.init());

  it('refuses it on a resource, a read that needs no key', async () => {
    @McpController()
    class Reads {
      @Resource({ uri: 'mcp://orders', name: 'orders', mimeType: 'application/json' })
      @Idempotent()
      orders() {
        return { contents: [] };
      }
    }
    await expect(start(Reads)).rejects.toThrow(
      'Reads.orders: an MCP resource or prompt is a read, which needs no key; @Idempotent() protects MCP tools',
    );
  });

  it('refuses key sources it does not know, naming the route', async () => {
    @McpController()
    class Tools {
      @Tool({ name: 'pay', description: 'Pays.', parameters: z.object({ amount: z.number() }) })
      @Idempotent({ mcp: { keySources: ['body' as never] } })
      pay() {
        return { content: [] };
      }
    }
    await expect(start(Tools)).rejects.toThrow(
      "Tools.pay: idempotency option mcp.keySources must be a non-empty list of 'argument', 'meta' and 'header', got [\"body\"]",
    );
  });

  it('accepts keyFrom on a tool (the key argument’s name), which elsewhere is for GraphQL mutations only', async () => {
    @McpController()
    class Renamed {
      @Tool({ name: 'pay', description: 'Pays.', parameters: z.object({ requestId: z.string() }) })
      @Idempotent({ keyFrom: { arg: 'requestId' } })
      pay() {
        return { content: [] };
      }
    }
    await expect(start(Renamed).then((app) => app.close())).resolves.toBeUndefined();
  });

  it('marks a tool idempotentHint: true whatever the decorator order, and keeps a hint the app set', async () => {
    @McpController()
    class Hinted {
      @Tool({ name: 'below', description: 'd', parameters: z.object({}) })
      @Idempotent()
      below() {
        return { content: [] };
      }

      @Idempotent()
      @Tool({ name: 'above', description: 'd', parameters: z.object({}) })
      above() {
        return { content: [] };
      }

      @Tool({ name: 'own', description: 'd', parameters: z.object({}), annotations: { idempotentHint: false } })
      @Idempotent()
      own() {
        return { content: [] };
      }
    }
    await Promise.resolve(); // the hint is added once the class is defined
    const hint = (name: 'below' | 'above' | 'own') =>
      (Reflect.getMetadata('mcp:tool', Hinted.prototype[name]) as { annotations?: { idempotentHint?: boolean } })
        .annotations?.idempotentHint;
    expect([hint('below'), hint('above'), hint('own')]).toEqual([true, true, false]);
  });
});
