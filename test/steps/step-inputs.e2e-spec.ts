import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  IdempotencyAdmin,
  IdempotencyContext,
  IdempotencyInFlightError,
  IdempotencyMismatchError,
  IdempotencyModule,
  IdempotencyService,
} from 'nestjs-dynamodb-idempotency';
import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';
import { Dynalite, localClient, uniqueTableName } from '../support/dynalite';
import { Engine, ENGINES, startStore } from '../support/engines';
import { createIdempotencyTable } from '../support/table';

/**
 * What a step is given, from the edges of what the API accepts: names built from data (`__proto__`, a lone
 * surrogate), a different request under a client key whose first request failed, two calls of the retrying client in
 * one step, a step started by work its call left running. Through `IdempotencyService.execute` on each DynamoDB API,
 * with a payment provider (a real HTTP server) that deduplicates by `Idempotency-Key` as real ones do.
 */
interface Charge {
  id: string;
  amount: number;
  key: string;
}

/** A provider that answers a key it has seen with the charge it made for it, whatever the new body says. */
async function startProvider(): Promise<{ url: string; charges: Charge[]; server: Server }> {
  const charges: Charge[] = [];
  const byKey = new Map<string, Charge>();
  const server = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk) => (text += chunk));
    request.on('end', () => {
      const key = String(request.headers['idempotency-key']);
      let charge = byKey.get(key);
      if (!charge) {
        charge = { id: `ch_${charges.length + 1}`, amount: (JSON.parse(text) as { amount: number }).amount, key };
        charges.push(charge);
        byKey.set(key, charge);
      }
      response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify(charge));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, charges, server };
}

describe.each(ENGINES)('step inputs on %s', (engine: Engine) => {
  let store: Dynalite;
  let client: DynamoDBClient;
  let provider: Awaited<ReturnType<typeof startProvider>>;
  const contexts: INestApplicationContext[] = [];
  let keys = 0;
  const newKey = () => `step-inputs-${engine}-${process.pid}-${++keys}`;

  beforeAll(async () => {
    store = await startStore(engine);
    client = localClient(store.endpoint);
    provider = await startProvider();
  });
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });
  afterAll(async () => {
    await new Promise((resolve) => provider.server.close(resolve));
    client.destroy();
    await store.stop();
  });

  /** The module on a table of its own, the replay cache off: every call reaches DynamoDB. */
  async function instance(shared?: string) {
    const tableName = shared ?? uniqueTableName('stepinputs');
    if (!shared) await createIdempotencyTable(client, tableName);
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ client, tableName, replayCache: { enabled: false } })],
    }).compile();
    const context = await moduleRef.init();
    contexts.push(context);
    return { service: context.get(IdempotencyService), admin: context.get(IdempotencyAdmin), tableName };
  }

  it('round-trips a step named __proto__ (or constructor): a retry resumes it without running it, inspect shows it, duplicates replay', async () => {
    const { service, admin, tableName } = await instance();
    const key = newKey();
    const runs: string[] = [];
    const handler = (fail: boolean) => async (context: IdempotencyContext) => {
      const proto = await context.step('__proto__', ({ attempt }) => (runs.push(`__proto__:${attempt}`), 'p'));
      const ctor = await context.step('constructor', ({ attempt }) => (runs.push(`constructor:${attempt}`), 'c'));
      if (fail) throw new Error('not final');
      return [proto, ctor];
    };
    await expect(service.execute({ operation: 'names', key }, handler(true))).rejects.toThrow('not final');
    expect(await service.execute({ operation: 'names', key }, handler(false))).toEqual(['p', 'c']);
    expect(runs).toEqual(['__proto__:1', 'constructor:1']);
    const report = await admin.inspect({ name: 'fn names', key });
    // Two steps recorded in the same second come back in the store's map order.
    expect(report?.steps?.map(({ name }) => name).sort()).toEqual(['__proto__', 'constructor']);
    // A duplicate's claim fails its condition and reads the record from the error's answer (the SDK cannot read a
    // map key __proto__ there): it replays, and a duplicate in flight (on a second instance) is told so: never a fault.
    expect(await service.execute({ operation: 'names', key }, handler(false))).toEqual(['p', 'c']);
    const second = await instance(tableName);
    let release!: () => void;
    let stepped!: () => void;
    const recorded = new Promise<void>((resolve) => (stepped = resolve));
    const running = service.execute({ operation: 'held', key }, async (context) => {
      await context.step('__proto__', () => 'p');
      stepped();
      await new Promise<void>((resolve) => (release = resolve));
      return 'done';
    });
    await recorded;
    await expect(second.service.execute({ operation: 'held', key }, () => 'again')).rejects.toBeInstanceOf(
      IdempotencyInFlightError,
    );
    release();
    await expect(running).resolves.toBe('done');
    expect(await second.service.execute({ operation: 'held', key }, () => 'again')).toBe('done');
  });

  it('refuses a name that is not well-formed Unicode at step(), before it runs; the table stays readable', async () => {
    const { service, tableName } = await instance();
    const key = newKey();
    const fn = jest.fn();
    const refused = service.execute({ operation: 'names', key }, (context) => context.step('a\uD800', fn));
    await expect(refused).rejects.toThrow(TypeError);
    await expect(refused).rejects.toThrow('the name is not well-formed Unicode (a lone surrogate)');
    expect(fn).not.toHaveBeenCalled();
    // The key is released (a TypeError is not final) and every item still reads.
    await expect(client.send(new ScanCommand({ TableName: tableName }))).resolves.toBeDefined();
    expect(await service.execute({ operation: 'names', key }, (context) => context.step('a', () => 'ok'))).toBe('ok');
  });

  it('gives a different request under one client key its own step keys: 999 ordered is 999 charged', async () => {
    const { service, admin } = await instance();
    const key = newKey();
    const http = createIdempotentClient({ baseUrl: provider.url });
    const stepKeys: string[] = [];
    const order = (amount: number, fail: boolean) =>
      service.execute({ operation: 'orders', key, fingerprint: { amount } }, async (context) => {
        const charge = await context.step('charge', async ({ key: stepKey }) => {
          stepKeys.push(stepKey);
          return (await http.request<Charge>('POST', '/charges', { body: { amount } })).body;
        });
        if (fail) throw new Error('the receipt service is down'); // not final: the record is FAILED
        return charge;
      });
    await expect(order(100, true)).rejects.toThrow('the receipt service is down');
    await expect(order(100, true)).rejects.toThrow('the receipt service is down'); // the same request: resumed
    // Another request with the client's key: refused while the first's recorded charge is kept; once an operator
    // forgets it (or the record expires), accepted as new and charged for what it asked.
    await expect(order(999, false)).rejects.toBeInstanceOf(IdempotencyMismatchError);
    expect((await admin.release({ name: 'fn orders', key }, { force: true })).done).toBe(true);
    expect(await order(999, false)).toMatchObject({ amount: 999 });
    expect(stepKeys).toHaveLength(2);
    expect(stepKeys[0]).not.toBe(stepKeys[1]);
    const charged = provider.charges.filter((charge) => stepKeys.includes(charge.key));
    expect(charged.map(({ amount }) => amount)).toEqual([100, 999]);
  });

  it("refuses a second call without key or name in one step before it is sent: one step's key, one call", async () => {
    const { service } = await instance();
    const http = createIdempotentClient({ baseUrl: provider.url });
    const before = provider.charges.length;
    const twice = service.execute({ operation: 'orders', key: newKey() }, (context) =>
      context.step('charge', async () => {
        await http.request('POST', '/charges', { body: { amount: 1 } });
        await http.request('POST', '/charges', { body: { amount: 2 } });
      }),
    );
    await expect(twice).rejects.toThrow("an earlier call in this step took the step's key");
    expect(provider.charges.slice(before).map(({ amount }) => amount)).toEqual([1]);
    // Named, each call has its own key.
    const named = await service.execute({ operation: 'orders', key: newKey() }, (context) =>
      context.step('charge', async () => {
        const one = await http.request<Charge>('POST', '/charges', { body: { amount: 3 }, name: 'card' });
        const two = await http.request<Charge>('POST', '/charges', { body: { amount: 4 }, name: 'fee' });
        return [one.body.amount, two.body.amount];
      }),
    );
    expect(named).toEqual([3, 4]);
  });

  it('refuses a step that work left running starts after its call ended, before its function runs', async () => {
    const { service } = await instance();
    let late: Promise<unknown> | undefined;
    const fn = jest.fn();
    await service.execute({ operation: 'orders', key: newKey() }, (context) => {
      late = new Promise((resolve) => setTimeout(resolve, 50)).then(() => context.step('late', fn));
      return 'answered';
    });
    await expect(late).rejects.toThrow('the call has already ended; the step was not started');
    expect(fn).not.toHaveBeenCalled();
  });

  it('records a result whose toJSON returns the object itself by its members, on a first run and a replay', async () => {
    const { service } = await instance();
    const key = newKey();
    class Receipt {
      readonly id = 'rc_1';
      toJSON() {
        return this;
      }
    }
    const run = () =>
      service.execute({ operation: 'receipts', key }, (context) => context.step('receipt', () => new Receipt()));
    expect(await run()).toBeInstanceOf(Receipt); // the first run returns the function's own value
    expect(await run()).toEqual({ id: 'rc_1' }); // the replay: as JSON.stringify writes it
  });
});
