import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { ScriptProcess, startScript } from '../support/script-process';
import { createIdempotencyTable } from '../support/table';
import type { OrderPaid } from './listeners.script';

interface Answer {
  result?: unknown;
  error?: string;
}

/**
 * `@Idempotent()` under `@OnEvent` and `@Cron` with the instances in processes of their own (listeners.script.ts): an
 * event fanned out to both runs once, an instance SIGKILLed between a listener's steps leaves the event to the next
 * delivery, which resumes after the first step, and a job's tick whose runner dies is run once by the instance that
 * waited for it.
 */
describe('@Idempotent() under @OnEvent and @Cron, two instance processes', () => {
  const engine = ENGINES.at(-1)!; // DynamoDB Local when the run has it
  let endpoint: string;
  let stopStore: () => Promise<void>;
  const instances: ScriptProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'listener-effects-'));
  let nextId = 0;

  beforeAll(async () => {
    ({ endpoint, stop: stopStore } = await startStore(engine));
  });
  afterEach(async () => {
    await Promise.all(instances.splice(0).map((instance) => instance.kill()));
  });
  afterAll(() => stopStore());

  async function setUp(name: string, env: Record<string, string> = {}) {
    const tableName = uniqueTableName(name);
    await createIdempotencyTable(localClient(endpoint), tableName);
    const effects = join(dir, `${tableName}.log`);
    writeFileSync(effects, '');
    return {
      lines: () => readFileSync(effects, 'utf8').split('\n').filter(Boolean),
      start: async () => {
        const script = join(__dirname, 'listeners.script.ts');
        const instance = await startScript(script, {
          DYNAMODB_ENDPOINT: endpoint,
          IDEMPOTENCY_TABLE: tableName,
          EFFECTS: effects,
          ...env,
        });
        instances.push(instance);
        return instance;
      },
    };
  }

  /** Delivers the event to the instance's emitter; its listener's answer (or a dead instance's `undefined`). */
  function deliver(instance: ScriptProcess, event: OrderPaid): Promise<Answer | undefined> {
    const id = nextId++;
    return new Promise((resolve) => {
      const listen = (message: Answer & { id?: number }) => {
        if (message.id !== id) return;
        instance.child.off('message', listen);
        resolve(message);
      };
      instance.child.on('message', listen);
      void instance.exited.then(() => resolve(undefined));
      instance.child.send({ id, event });
    });
  }

  it('an event fanned out to both instances at once: one charge, one shipment, both listeners answer its result', async () => {
    const { lines, start } = await setUp('ev-fanout');
    const [a, b] = await Promise.all([start(), start()]);
    const event: OrderPaid = { orderId: 'o-1', amount: 10 };
    const [fromA, fromB] = await Promise.all([deliver(a, event), deliver(b, event)]);
    expect(fromA!.result).toEqual(fromB!.result);
    expect(fromA!.result).toMatchObject({ chargeId: 'ch-o-1' });
    expect(lines().map((line) => line.split(' ').slice(0, 2).join(' '))).toEqual(['charge o-1', 'ship o-1']);
  });

  it('an instance SIGKILLed between a listener’s steps: the event delivered again to the other resumes after the charge', async () => {
    const { lines, start } = await setUp('ev-crash');
    const [doomed, survivor] = await Promise.all([start(), start()]);
    doomed.child.send({ arm: true });
    const event: OrderPaid = { orderId: 'o-2', amount: 20 };
    expect(await deliver(doomed, event)).toBeUndefined();
    const answer = await deliver(survivor, event);
    expect(answer).toEqual({ id: expect.any(Number), result: { chargeId: 'ch-o-2', shippedBy: survivor.child.pid } });
    expect(lines()).toEqual([`charge o-2 ${doomed.child.pid}`, `ship o-2 ${survivor.child.pid}`]);
  });

  it('a @Cron job on two instances: one report per tick, and the tick whose runner died is reported by the other', async () => {
    const { lines, start } = await setUp('cron-crash', { CRON: '1' });
    const [doomed, survivor] = await Promise.all([start(), start()]);
    await sleep(2500);
    doomed.child.send({ arm: true });
    await doomed.exited;
    const died = lines()
      .find((line) => line.startsWith('died '))!
      .split(' ')[1];
    const reported = () =>
      lines()
        .filter((line) => line.startsWith('report '))
        .map((line) => line.split(' '));
    // The dead runner's lease (2 s) ends; the survivor, waiting on that tick, takes it over.
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await sleep(200)) {
      if (reported().some(([, tick]) => tick === died)) break;
    }
    await survivor.kill();
    const reports = reported();
    const ticks = reports.map(([, tick]) => tick);
    expect(new Set(ticks).size).toBe(ticks.length);
    expect(reports.filter(([, tick]) => tick === died)).toEqual([['report', died, String(survivor.child.pid)]]);
    expect(ticks.filter((tick) => tick < died).length).toBeGreaterThanOrEqual(1);
  });
});
