import { INestApplication } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import type { Client } from '@modelcontextprotocol/client';
import { McpController, Tool } from '@rekog/mcp-nest';
import fc from 'fast-check';
import { z } from 'zod';
import { Idempotent, IdempotencyModuleOptions, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { Dynalite, localClient, uniqueTableName } from '../support/dynalite';
import { Engine, ENGINES, startStore } from '../support/engines';
import { mcpClient, startMcpApp } from '../support/mcp';
import { createIdempotencyTable } from '../support/table';
import { INPUT_RUNS, INPUT_SEED, jsonMeaning } from './inputs';

/**
 * What an `@Idempotent()` MCP tool accepts, generated: where the call carries its key (the `idempotencyKey` argument,
 * `_meta`'s `idempotency-key` or `idempotency_key`, the `Idempotency-Key` header, several of them, none) and what the
 * key is (text of any kind, empty and over-long keys, control characters, numbers, objects, null, header lists), the caller
 * (`req.user`, or none) and the arguments (any JSON); every other result has a member JSON leaves out (a function). Two server processes' worth of apps on one store, called over
 * Streamable HTTP by the official client; checked on every run: a key the module refuses answers an `isError` result
 * before the tool runs, the tool runs at most once per caller and key, and a second call gets the first one's result
 * (marked) exactly when it is the same call as JSON says it, else a mismatch. Never an internal error.
 */
const runs = INPUT_RUNS;
const seed = INPUT_SEED;
const REPLAYED = 'nestjs-dynamodb-idempotency/replayed';
const PROBLEM = 'nestjs-dynamodb-idempotency/problem';

/** Every run of the tool, by caller and key. */
const runsByKey = new Map<string, number>();
let runId = 0;

@McpController()
class Tools {
  @Tool({
    name: 'act',
    description: 'Acts once per key.',
    parameters: z.object({ idempotencyKey: z.string().optional(), payload: z.any(), tag: z.string() }),
  })
  @Idempotent()
  act(@Payload() args: { tag: string }) {
    runsByKey.set(args.tag, (runsByKey.get(args.tag) ?? 0) + 1);
    const run = ++runId;
    // Every other result carries a function member (a formatter): it cannot be recorded as typed values, and is kept
    // as the JSON the client was sent.
    const unrecordable = run % 2 === 0 ? { format: () => `run ${run}` } : {};
    return { content: [{ type: 'text', text: 'done' }], structuredContent: { run }, ...unrecordable };
  }
}

/** One generated call: where its key is, the caller, the arguments. */
interface GeneratedCall {
  argument?: string;
  meta?: { name: 'idempotency-key' | 'idempotency_key'; value: unknown };
  header?: string;
  user?: string;
  payload: unknown;
}

/** The key a call carries by the documented order (argument, `_meta`, header; empty counts as absent). */
function carriedKey(call: GeneratedCall): unknown {
  if (call.argument !== undefined && call.argument !== '') return call.argument;
  const meta = call.meta?.value;
  if (meta !== undefined && meta !== null && meta !== '') return meta;
  return call.header === undefined || call.header === '' ? undefined : headerKey(call.header);
}

/** A header's key: `"abc"` is abc; a list (a comma, a quote inside quotes) is no one key (an object: refused). */
function headerKey(value: string): unknown {
  const quoted = /^"(.*)"$/s.exec(value);
  const key = quoted ? quoted[1] : value;
  return key.includes(',') || (quoted && key.includes('"')) ? { list: value } : key;
}

/** The key a value stands for, by the documented rule (written apart from the library's code). */
function keyOf(value: unknown): { key?: string; refused?: 'key-missing' | 'key-invalid' } {
  if (value === undefined || value === null) return { refused: 'key-missing' };
  if (typeof value === 'number' && Number.isFinite(value)) return { key: String(value) };
  if (typeof value !== 'string' || value.length === 0) return { refused: 'key-invalid' };
  // eslint-disable-next-line no-control-regex
  if ([...value].length > 255 || /[\u0000-\u001f\u007f-\u009f]/.test(value)) return { refused: 'key-invalid' };
  return { key: value };
}

const STORES: ('in-memory' | Engine)[] = ['in-memory', ...ENGINES];

describe.each(STORES)('generated MCP tool calls on the %s store', (store) => {
  let dynamo: Dynalite | undefined;
  const apps: INestApplication[] = [];
  const clients: Client[] = [];

  beforeAll(async () => {
    let options: IdempotencyModuleOptions = { repository: new InMemoryIdempotencyRepository() };
    if (store !== 'in-memory') {
      dynamo = await startStore(store);
      const client = localClient(dynamo.endpoint);
      const tableName = uniqueTableName('mcp_inputs');
      await createIdempotencyTable(client, tableName);
      options = { client, tableName };
    }
    apps.push(await startMcpApp(options, [Tools]), await startMcpApp(options, [Tools]));
  });
  afterAll(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
    await Promise.all(apps.map((app) => app.close()));
    await dynamo?.stop();
  });

  /** A client of app `i` sending `headers` (a fresh one per header set, as an agent's transport holds them). */
  async function clientOf(i: number, headers: Record<string, string>): Promise<Client> {
    const client = await mcpClient(apps[i], headers);
    clients.push(client);
    return client;
  }

  const text = fc.oneof(
    { weight: 4, arbitrary: fc.string({ unit: 'binary', minLength: 0, maxLength: 30 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 250, maxLength: 260 }) },
  );
  const generatedCall: fc.Arbitrary<GeneratedCall> = fc.record(
    {
      argument: text,
      meta: fc.record({
        name: fc.constantFrom('idempotency-key' as const, 'idempotency_key' as const),
        value: fc.oneof(text, fc.integer(), fc.constantFrom<unknown>(null, '', {}, true, ['k'])),
      }),
      // What a header can carry: printable ASCII without spaces at its ends.
      header: fc.stringMatching(/^[!-~]{1,40}$/),
      user: fc.constantFrom('alice', 'bob'),
      payload: fc.jsonValue({ maxDepth: 2 }),
    },
    { requiredKeys: ['payload'] },
  );

  it(`refuses what it cannot key before the tool runs, runs it once per caller and key, and answers a second call by what JSON says of it (${runs} runs)`, async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        generatedCall,
        fc.boolean(),
        fc.boolean(),
        fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined }),
        async (generated, sameCaller, otherApp, otherPayload) => {
          // Each run its own keys: text gets the store's and the run's prefix (an over-long key stays over the limit),
          // a number the run's range; the refused values stay as they are.
          const prefix = `${store}-${++run}-`;
          const own = (raw: unknown) =>
            typeof raw === 'string' && raw.length > 0
              ? prefix + raw
              : typeof raw === 'number'
                ? run * 1e10 + (raw % 1e9)
                : raw;
          const first: GeneratedCall = {
            ...generated,
            argument: generated.argument && (own(generated.argument) as string),
            header: generated.header && (own(generated.header) as string),
            meta: generated.meta && { ...generated.meta, value: own(generated.meta.value) },
          };
          const second: GeneratedCall = {
            ...first,
            user: sameCaller ? first.user : first.user === 'alice' ? 'bob' : 'alice',
            payload: otherPayload === undefined ? first.payload : otherPayload,
          };
          const send = async (i: number, call: GeneratedCall) => {
            const headers: Record<string, string> = {};
            if (call.user) headers['x-user'] = call.user;
            if (call.header) headers['idempotency-key'] = call.header;
            const key = carriedKey(call);
            const tag = `${call.user ?? '-'} ${String(keyOf(key).key)}`;
            const client = await clientOf(i, headers);
            const args: Record<string, unknown> = { payload: call.payload, tag };
            if (call.argument !== undefined) args.idempotencyKey = call.argument;
            const params = call.meta ? { _meta: { [call.meta.name]: call.meta.value } } : {};
            return (await client.callTool({ name: 'act', arguments: args, ...params })) as {
              isError?: boolean;
              structuredContent?: { run: number };
              _meta?: Record<string, any>;
            };
          };
          const outcomes = [await send(0, first), await send(otherApp ? 1 : 0, second)];
          let stored: { id: string; meaning: string; run: number } | undefined;
          for (const [i, call] of [first, second].entries()) {
            const outcome = outcomes[i];
            const key = keyOf(carriedKey(call));
            // The tag the tool sees is part of the arguments: the same call is the same payload and tag.
            const meaning = jsonMeaning({ payload: call.payload, tag: `${call.user ?? '-'} ${String(key.key)}` });
            const id = `${call.user ?? '-'} ${key.key}`;
            if (key.refused) {
              expect(outcome.isError).toBe(true);
              expect(outcome._meta?.[PROBLEM]?.type).toBe(`urn:nestjs-dynamodb-idempotency:${key.refused}`);
            } else if (stored === undefined || stored.id !== id) {
              expect(outcome.isError).toBeFalsy();
              expect(outcome._meta?.[REPLAYED]).toBeUndefined();
              stored = { id, meaning, run: outcome.structuredContent!.run };
            } else if (stored.meaning === meaning) {
              expect(outcome.structuredContent).toEqual({ run: stored.run });
              expect(outcome._meta?.[REPLAYED]).toBe(true);
            } else {
              expect(outcome._meta?.[PROBLEM]?.type).toBe('urn:nestjs-dynamodb-idempotency:fingerprint-mismatch');
            }
          }
          for (const call of [first, second]) {
            const tag = `${call.user ?? '-'} ${String(keyOf(carriedKey(call)).key)}`;
            expect(runsByKey.get(tag) ?? 0).toBeLessThanOrEqual(1);
          }
        },
      ),
      { numRuns: runs, seed },
    );
  }, 300_000);
});
