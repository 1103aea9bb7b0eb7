import { randomBytes } from 'node:crypto';
import { DeleteItemCommand, DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  IdempotencyAdmin,
  IdempotencyClock,
  IdempotencyContext,
  IdempotencyLeaseLostError,
  IdempotencyModule,
  IdempotencyMismatchError,
  IdempotencyModuleOptions,
  IdempotencyReconciler,
  IdempotencyService,
  UnrecordableValueError,
} from 'nestjs-dynamodb-idempotency';
import { runCli } from '../../libs/idempotency/src/cli/run-cli';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { createIdempotentClient } from 'nestjs-dynamodb-idempotency/client';
import { ManualClock } from 'nestjs-dynamodb-idempotency/testing';
import { countCalls } from '../support/call-counter';
import { testClock } from '../support/clock';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { LAYOUTS } from '../support/layouts';
import { createIdempotencyTable } from '../support/table';
import { metricValue, registerTestTelemetry } from '../support/telemetry';

/**
 * Recovery points (`IdempotencyContext.step`) through `IdempotencyService.execute`, on dynalite. Two module instances
 * on one table stand for two processes (the replay cache off, so every call reaches DynamoDB); each has its own clock,
 * so a lease can pass for one and not the other. Crashes of real processes are in steps-crash.e2e-spec.ts.
 */
const telemetry = registerTestTelemetry();
let dynamo: Dynalite;
let client: DynamoDBClient;
const contexts: INestApplicationContext[] = [];
beforeAll(async () => {
  dynamo = await startDynalite();
  client = localClient(dynamo.endpoint);
});
afterEach(async () => {
  await Promise.all(contexts.splice(0).map((context) => context.close()));
});
afterAll(() => dynamo.stop());

let keys = 0;
const newKey = () => `steps-${++keys}`;

async function newTable(layout = {}): Promise<string> {
  const tableName = uniqueTableName('steps');
  await createIdempotencyTable(client, tableName, layout);
  return tableName;
}

/** One "process": the module on `tableName`, its own clock and DynamoDB client (whose calls are counted). */
async function instance(tableName: string, options: IdempotencyModuleOptions = {}, clock: ManualClock = testClock()) {
  const own = localClient(dynamo.endpoint);
  const calls = countCalls(own);
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ client: own, tableName, replayCache: { enabled: false }, ...options })],
  })
    .overrideProvider(IdempotencyClock)
    .useValue(clock)
    .compile();
  const context = await moduleRef.init();
  contexts.push(context);
  return { service: context.get(IdempotencyService), clock, calls, context };
}

const item = async (tableName: string, key: string) => {
  const pk = recordKey('fn checkout', undefined, key);
  const { Item } = await client.send(
    new GetItemCommand({ TableName: tableName, Key: { pk: { S: pk } }, ConsistentRead: true }),
  );
  return Item && unmarshall(Item);
};

/** A handler of three steps whose effects are counted: a debit, a provider's charge, a receipt. */
function checkout() {
  const effects = { debit: 0, charge: 0, receipt: 0 };
  const seen: { name: string; key: string; attempt: number }[] = [];
  const handler = (fail?: (step: string) => void) => async (context: IdempotencyContext) => {
    const debit = await context.step('debit', ({ key, attempt }) => {
      seen.push({ name: 'debit', key, attempt });
      effects.debit++;
      return { ledgerId: `ledger-${effects.debit}`, at: new Date('2026-12-04T10:00:00.000Z'), cents: 1250n };
    });
    fail?.('after debit');
    const charge = await context.step('charge', ({ key, attempt }) => {
      seen.push({ name: 'charge', key, attempt });
      fail?.('inside charge');
      effects.charge++;
      return { chargeId: `ch-${effects.charge}`, tags: new Set(['card']), meta: new Map([['k', 1]]) };
    });
    const receipt = await context.step('receipt', () => {
      effects.receipt++;
      return undefined;
    });
    return { debit, charge, receipt };
  };
  return { effects, seen, handler };
}

/** Throws a plain error at the given point once: a non-final error, so the key is released (FAILED). */
const failOnceAt = (point: string) => {
  let failed = false;
  return (here: string) => {
    if (here === point && !failed) {
      failed = true;
      throw new Error(`crashed ${point}`);
    }
  };
};

describe('IdempotencyContext.step through execute()', () => {
  it('runs each step once, records it, and replays the whole result with its types to a duplicate', async () => {
    const tableName = await newTable();
    const { service, calls } = await instance(tableName);
    const { effects, handler } = checkout();
    const key = newKey();
    calls.reset();
    const first = await service.execute({ operation: 'checkout', key }, handler());
    expect(calls.counts).toEqual({ UpdateItem: 5 }); // claim, three steps, completion: n + 2
    const spans = telemetry.spans.getFinishedSpans().filter((span) => span.name === 'idempotency.step');
    expect(
      spans.slice(-3).map((span) => [span.attributes['idempotency.step'], span.attributes['idempotency.step.attempt']]),
    ).toEqual([
      ['debit', 1],
      ['charge', 1],
      ['receipt', 1],
    ]);
    expect(first.debit.at).toBeInstanceOf(Date);
    expect(first.debit.cents).toBe(1250n);
    const again = await service.execute({ operation: 'checkout', key }, handler());
    expect(again).toEqual(first);
    expect(again.charge.tags).toEqual(new Set(['card']));
    expect(effects).toEqual({ debit: 1, charge: 1, receipt: 1 });
    const stored = await item(tableName, key);
    expect(Object.keys(stored?.steps ?? {}).sort()).toEqual(['charge', 'debit', 'receipt']);
    expect(stored?.runs).toBe(1);
  });

  it('makes one more call per at-most-once step, its start: n + 2 + m', async () => {
    const tableName = await newTable();
    const { service, calls } = await instance(tableName);
    const handler = async (context: IdempotencyContext) => {
      const first = await context.step('reserve', () => 'reserved');
      const mail = await context.step('mail', () => 'sent', { semantics: 'at-most-once' });
      const third = await context.step('receipt', () => 'receipted', { semantics: 'at-most-once' });
      return [first, mail, third];
    };
    const key = newKey();
    calls.reset();
    expect(await service.execute({ operation: 'checkout', key }, handler)).toEqual(['reserved', 'sent', 'receipted']);
    expect(calls.counts).toEqual({ UpdateItem: 7 }); // claim, three steps, two starts, completion
    expect(await item(tableName, key)).toMatchObject({ status: 'COMPLETED' });
  });

  it('resumes after a non-final error: recorded steps come back typed without running, the rest run once', async () => {
    const tableName = await newTable();
    const { service, calls } = await instance(tableName);
    const { effects, seen, handler } = checkout();
    const key = newKey();
    const fail = failOnceAt('after debit');
    await expect(service.execute({ operation: 'checkout', key }, handler(fail))).rejects.toThrow('crashed after debit');
    expect((await item(tableName, key))?.status).toBe('FAILED');
    calls.reset();
    const count = async (result: string) =>
      metricValue(await telemetry.scrape(), 'idempotency_steps_total', { result });
    const [runBefore, resumedBefore] = [await count('run'), await count('resumed')];
    const resumed = await service.execute({ operation: 'checkout', key }, handler(fail));
    expect([(await count('run')) - runBefore, (await count('resumed')) - resumedBefore]).toEqual([2, 1]);
    expect(calls.counts).toEqual({ UpdateItem: 4 }); // claim (the steps came back with it), two steps, completion
    expect(effects).toEqual({ debit: 1, charge: 1, receipt: 1 });
    expect(resumed.debit).toEqual({ ledgerId: 'ledger-1', at: new Date('2026-12-04T10:00:00.000Z'), cents: 1250n });
    expect(resumed.debit.at).toBeInstanceOf(Date);
    expect(seen.map(({ name, attempt }) => [name, attempt])).toEqual([
      ['debit', 1],
      ['charge', 1],
    ]);
    // The first run recorded every step it started, so it counts for no step's attempt.
    expect((await item(tableName, key))?.runs).toBe(1);
  });

  it('runs a step that threw again with the same key and a higher attempt; the steps before it do not run', async () => {
    const tableName = await newTable();
    const { service } = await instance(tableName);
    const { effects, seen, handler } = checkout();
    const key = newKey();
    const fail = failOnceAt('inside charge');
    await expect(service.execute({ operation: 'checkout', key }, handler(fail))).rejects.toThrow(
      'crashed inside charge',
    );
    expect(Object.keys((await item(tableName, key))?.steps ?? {})).toEqual(['debit']); // a step that threw records nothing
    await service.execute({ operation: 'checkout', key }, handler(fail));
    const charges = seen.filter(({ name }) => name === 'charge');
    expect(charges.map(({ attempt }) => attempt)).toEqual([1, 2]);
    expect(charges[0].key).toBe(charges[1].key);
    expect(charges[0].key).toMatch(/^[0-9a-f]{64}$/);
    expect(seen.find(({ name }) => name === 'debit')?.key).not.toBe(charges[0].key);
    expect(effects.debit).toBe(1);
  });

  it("gives a step the key deriveKey(name) returns, and never hands one request another request's steps", async () => {
    const tableName = await newTable();
    const { service, clock } = await instance(tableName);
    const key = newKey();
    let derived = '';
    const stepKeys: string[] = [];
    await expect(
      service.execute({ operation: 'checkout', key, fingerprint: 'first' }, async (context) => {
        derived = context.deriveKey('debit');
        await context.step('debit', ({ key: stepKey }) => stepKeys.push(stepKey));
        throw new Error('not final');
      }),
    ).rejects.toThrow('not final');
    expect(stepKeys).toEqual([derived]);
    let ran = false;
    const second = () =>
      service.execute({ operation: 'checkout', key, fingerprint: 'second' }, (context) =>
        context.step('debit', () => {
          ran = true;
          return 'second request';
        }),
      );
    // The released record holds the first request's step: another request is refused while it is kept (300 s).
    await expect(second()).rejects.toBeInstanceOf(IdempotencyMismatchError);
    expect(ran).toBe(false);
    clock.advanceSeconds(301);
    const other = await second();
    expect(ran).toBe(true);
    expect(other).toBe('second request');
    expect((await item(tableName, key))?.runs).toBe(1);
  });

  it('refuses a second step of the same name, an unrecordable result and one over the size limit, naming the step', async () => {
    const tableName = await newTable();
    const { service } = await instance(tableName);
    const twice = service.execute({ operation: 'checkout', key: newKey() }, async (context) => {
      await context.step('debit', () => 1);
      return context.step('debit', () => 2);
    });
    await expect(twice).rejects.toThrow(/step\("debit"\): a step of that name already ran in this call/);
    const unrecordable = service.execute({ operation: 'checkout', key: newKey() }, (context) =>
      context.step('callback', () => ({ done: () => undefined })),
    );
    await expect(unrecordable).rejects.toThrow(UnrecordableValueError);
    await expect(unrecordable).rejects.toThrow('the result of step("callback").done is a function');
    const large = service.execute({ operation: 'checkout', key: newKey() }, (context) =>
      context.step('blob', () => ({ bytes: randomBytes(40_000) })),
    );
    await expect(large).rejects.toThrow(
      /step\("blob"\): it takes \d+ bytes stored \(its name and result\), over the limit of 32768/,
    );
  });

  it('refuses to start a step once the lease has passed by its own clock, and keeps the successor’s answer', async () => {
    const tableName = await newTable();
    const a = await instance(tableName);
    const b = await instance(tableName, {}, testClock(61_000 + 3_000)); // past the 60 s lease and the 2 s margin
    const { effects, handler } = checkout();
    const key = newKey();
    let thaw!: () => void;
    const frozen = new Promise<void>((resolve) => (thaw = resolve));
    const stalled = a.service.execute({ operation: 'checkout', key }, async (context) => {
      await context.step('debit', () => 'debited by a');
      await frozen; // a is frozen here (a Lambda container, a GC pause)
      return context.step('charge', () => {
        effects.charge++;
        return 'charged by a';
      });
    });
    await until(async () => (await item(tableName, key))?.steps?.debit !== undefined);
    const lostBefore = metricValue(await telemetry.scrape(), 'idempotency_steps_total', { result: 'lease_lost' });
    const successor = await b.service.execute({ operation: 'checkout', key }, handler());
    expect(successor.debit).toBe('debited by a'); // b resumed a's step
    expect(effects.charge).toBe(1);
    a.clock.advanceSeconds(64); // a thaws: its own clock says the lease is over
    thaw();
    await expect(stalled).rejects.toThrow(IdempotencyLeaseLostError);
    expect(effects.charge).toBe(1); // a did not run its next step
    expect(metricValue(await telemetry.scrape(), 'idempotency_steps_total', { result: 'lease_lost' })).toBe(
      lostBefore + 1,
    );
    const stored = await item(tableName, key);
    expect(stored?.status).toBe('COMPLETED');
    expect(JSON.parse(stored?.response).body.charge.chargeId).toBe('ch-1');
  });

  it("fences a step written by an owner that lost the key unseen: its result is refused, the successor's stands", async () => {
    const tableName = await newTable();
    const a = await instance(tableName);
    const b = await instance(tableName, {}, testClock(64_000));
    const key = newKey();
    let thaw!: () => void;
    const frozen = new Promise<void>((resolve) => (thaw = resolve));
    let started = false;
    const stalled = a.service.execute({ operation: 'checkout', key }, async (context) =>
      context.step('charge', async () => {
        started = true;
        await frozen; // frozen inside the step, its lease taken over meanwhile
        return 'charged by a';
      }),
    );
    await until(() => started);
    expect(
      await b.service.execute({ operation: 'checkout', key }, (context) => context.step('charge', () => 'by b')),
    ).toBe('by b');
    thaw();
    await expect(stalled).rejects.toThrow(IdempotencyLeaseLostError);
    const stored = await item(tableName, key);
    expect(stored?.steps?.charge.value).toContain('by b');
    expect(await b.service.execute({ operation: 'checkout', key }, () => 'never')).toBe('by b');
  });

  it("resumes a record the reconciler swept: the sweep keeps the record's steps", async () => {
    const tableName = await newTable();
    const clock = testClock();
    const a = await instance(tableName, {}, clock);
    const key = newKey();
    let started = false;
    const abandoned = a.service.execute({ operation: 'checkout', key }, async (context) => {
      await context.step('debit', () => 'debited');
      started = true;
      return new Promise<never>(() => undefined); // the owner hangs after step 1 (its process died)
    });
    void abandoned.catch(() => undefined);
    await until(() => started);
    clock.advanceSeconds(70);
    const sweeper = await instance(tableName, {}, clock);
    const swept = await sweeper.context.get(IdempotencyReconciler).sweep({ maxPagesPerSecond: 1000 });
    expect(swept.released).toBe(1);
    expect((await item(tableName, key))?.status).toBe('FAILED');
    let debited = 0;
    const resumed = await sweeper.service.execute({ operation: 'checkout', key }, async (context) => {
      const debit = await context.step('debit', () => ++debited);
      return { debit, charge: await context.step('charge', () => 'charged') };
    });
    expect(resumed).toEqual({ debit: 'debited', charge: 'charged' });
    expect(debited).toBe(0);
  });

  it('starts over when the TTL deleted the record after its lease ended: each step runs again with its same key', async () => {
    const tableName = await newTable();
    const clock = testClock();
    const a = await instance(tableName, {}, clock);
    const key = newKey();
    const keysSeen: string[] = [];
    let started = false;
    const abandoned = a.service.execute({ operation: 'checkout', key }, async (context) => {
      await context.step('debit', ({ key: stepKey }) => keysSeen.push(stepKey));
      started = true;
      return new Promise<never>(() => undefined); // the owner died after step 1
    });
    void abandoned.catch(() => undefined);
    await until(() => started);
    clock.advanceSeconds(70);
    // DynamoDB's TTL may delete an item any time after `expires_at`, which for a PENDING record is its lease's end.
    await client.send(
      new DeleteItemCommand({ TableName: tableName, Key: { pk: { S: recordKey('fn checkout', undefined, key) } } }),
    );
    const again = await a.service.execute({ operation: 'checkout', key }, (context) =>
      context.step('debit', ({ key: stepKey, attempt }) => {
        keysSeen.push(stepKey);
        return attempt;
      }),
    );
    expect(again).toBe(1); // nothing says it ran before
    expect(keysSeen).toHaveLength(2);
    expect(keysSeen[1]).toBe(keysSeen[0]); // so the downstream call is deduplicated by its own key
  });

  it('seals step results with encryption, and opens them when it resumes', async () => {
    const tableName = await newTable();
    const encryption = { keys: [Buffer.alloc(32, 7)] };
    const { service } = await instance(tableName, { encryption });
    const key = newKey();
    await expect(
      service.execute({ operation: 'checkout', key }, async (context) => {
        await context.step('card', () => ({ pan: '4242424242424242' }));
        throw new Error('not final');
      }),
    ).rejects.toThrow('not final');
    const stored = await item(tableName, key);
    expect(JSON.stringify(stored?.steps)).not.toContain('4242');
    let ran = false;
    const resumed = await service.execute({ operation: 'checkout', key }, (context) =>
      context.step('card', () => {
        ran = true;
        return { pan: 'other' };
      }),
    );
    expect(resumed).toEqual({ pan: '4242424242424242' });
    expect(ran).toBe(false);
  });

  it('resumes on a single-table layout (PK/SK, prefix, every attribute renamed)', async () => {
    const layout = LAYOUTS['single-table'];
    const tableName = await newTable(layout);
    const { service } = await instance(tableName, layout);
    const key = newKey();
    let debits = 0;
    const run = (fail: boolean) =>
      service.execute({ operation: 'checkout', key, scope: 'tenant-1' }, async (context) => {
        const debit = await context.step('debit', () => ++debits);
        if (fail) throw new Error('not final');
        return debit;
      });
    await expect(run(true)).rejects.toThrow('not final');
    expect(await run(false)).toBe(1);
    expect(debits).toBe(1);
  });

  it("gives the retrying client the step's key as its default inside a step, and a new one outside", async () => {
    const tableName = await newTable();
    const { service } = await instance(tableName);
    const sent: string[] = [];
    const client = createIdempotentClient({
      fetch: async (_url, init) => {
        sent.push(new Headers(init?.headers).get('idempotency-key') ?? '');
        return new Response('{}', { status: 201, headers: { 'content-type': 'application/json' } });
      },
    });
    let stepKey = '';
    await service.execute({ operation: 'checkout', key: newKey() }, async (context) => {
      await context.step('charge', async ({ key }) => {
        stepKey = key;
        await client.request('POST', 'http://provider.invalid/charges');
      });
      await client.request('POST', 'http://provider.invalid/notes');
    });
    expect(sent[0]).toBe(stepKey);
    expect(sent[1]).not.toBe(stepKey);
    expect(sent[1]).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('runs steps without recording them in optimistic mode, with their keys', async () => {
    const tableName = await newTable();
    const { service } = await instance(tableName);
    const key = newKey();
    const seen: string[] = [];
    const run = () =>
      service.execute({ operation: 'checkout', key, mode: 'optimistic' }, async (context) => {
        await context.step('debit', ({ key: stepKey, attempt }) => seen.push(`${stepKey}:${attempt}`));
        throw new Error('not final');
      });
    await expect(run()).rejects.toThrow('not final');
    await expect(run()).rejects.toThrow('not final');
    expect(seen).toHaveLength(2);
    expect(seen[0]).toBe(seen[1]);
    expect(seen[0]).toMatch(/^[0-9a-f]{64}:1$/);
  });
});

describe('steps for operators', () => {
  async function cli(args: string[]): Promise<{ code: number; stdout: string }> {
    const stdout: string[] = [];
    const code = await runCli(args, { log: (line) => stdout.push(line), error: () => undefined });
    return { code, stdout: stdout.join('\n') };
  }

  it('keys:inspect lists the steps (the result only with --show-body); IdempotencyAdmin.inspect returns them', async () => {
    const tableName = await newTable();
    const { service, context } = await instance(tableName);
    const key = newKey();
    await expect(
      service.execute({ operation: 'checkout', key }, async (step) => {
        await step.step('charge', () => ({ chargeId: 'ch_9', at: new Date('2026-12-04T10:00:00.000Z') }));
        throw new Error('not final');
      }),
    ).rejects.toThrow('not final');
    const report = await context.get(IdempotencyAdmin).inspect({ name: 'fn checkout', key }, { showBody: true });
    expect(report?.steps).toEqual([
      {
        name: 'charge',
        recordedAt: expect.stringMatching(/^\d{4}-/),
        attempt: 1,
        run: 1,
        bytes: expect.any(Number),
        result: { chargeId: 'ch_9', at: { $type: 'Date', value: '2026-12-04T10:00:00.000Z' } },
      },
    ]);
    const flags = ['--table', tableName, '--endpoint', dynamo.endpoint, '--region', 'us-east-1'];
    const selector = ['--record-key', recordKey('fn checkout', undefined, key)];
    const plain = await cli(['keys:inspect', ...selector, ...flags]);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toMatch(/step "charge": recorded at \S+, attempt 1, \d+ bytes$/m);
    expect(plain.stdout).not.toContain('ch_9');
    const shown = await cli(['keys:inspect', ...selector, '--show-body', ...flags]);
    expect(shown.stdout).toContain('result: {"chargeId":"ch_9"');
  });

  it('keys:release of a stuck record with steps marks it FAILED and keeps them: the next request resumes', async () => {
    const tableName = await newTable();
    const { service, context } = await instance(tableName);
    const key = newKey();
    let started = false;
    const hung = service.execute({ operation: 'checkout', key }, async (step) => {
      await step.step('charge', () => 'charged once');
      started = true;
      return new Promise<never>(() => undefined);
    });
    void hung.catch(() => undefined);
    await until(() => started);
    const released = await context.get(IdempotencyAdmin).release({ name: 'fn checkout', key });
    expect(released).toMatchObject({ done: true, note: expect.stringContaining('resuming from the 1 step(s)') });
    expect((await item(tableName, key))?.status).toBe('FAILED');
    const other = await instance(tableName);
    let charged = 0;
    expect(
      await other.service.execute({ operation: 'checkout', key }, (step) => step.step('charge', () => ++charged)),
    ).toBe('charged once');
    expect(charged).toBe(0);
  });
});

async function until(condition: () => unknown | Promise<unknown>): Promise<void> {
  for (let tries = 0; !(await condition()); tries++) {
    if (tries > 400) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
