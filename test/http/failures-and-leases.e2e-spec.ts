import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbIdempotencyRepository, IdempotencyAdmin } from 'nestjs-dynamodb-idempotency';
import { TableLayout } from '../../libs/idempotency/src/dynamodb/table-layout';
import { post, TestApp } from '../support/app';
import { PLATFORM_ENGINES } from '../support/engines';
import { scanTable } from '../support/table';
import { Runs } from './payments.fixture';
import { PaymentsScenario, startPaymentsScenario } from './payments.scenario';

describe.each(PLATFORM_ENGINES)('failures, expiry and leases on %s, %s, %s layout', (platform, engine, layout) => {
  let scenario: PaymentsScenario;
  let client: DynamoDBClient;
  let tableName: string;
  let test: TestApp;
  let keys = 0;
  const newKey = () => `key-${platform}-${++keys}`;
  const runs = () => test.get(Runs);
  const statusesOf = async (prefix: string) =>
    (await scanTable(client, tableName, scenario.layout))
      .filter(({ item }) => item.pk.startsWith(prefix))
      .map(({ item }) => item.status);

  beforeAll(async () => {
    scenario = await startPaymentsScenario(platform, { engine, layout });
    ({ client, tableName, test } = scenario);
  });
  afterAll(() => scenario.stop());

  it('marks a failed attempt FAILED, passes its error through, and runs the retry', async () => {
    const key = newKey();
    runs().failuresLeft = 1;
    const before = runs().of('create');
    const failed = await post(`${test.url}/payments`, { amount: 3 }, { 'Idempotency-Key': key });
    expect(failed.status).toBe(500);
    expect(JSON.parse(failed.text)).toMatchObject({ message: 'payment provider failed' });
    expect(await statusesOf('POST /payments#')).toContain('FAILED');

    const retry = await post(`${test.url}/payments`, { amount: 3 }, { 'Idempotency-Key': key });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(runs().of('create')).toBe(before + 2);
  });

  it('leaves the key claimable after a validation error (400)', async () => {
    const key = newKey();
    const before = runs().of('create');
    const invalid = await post(`${test.url}/payments`, { amount: 'lots' }, { 'Idempotency-Key': key });
    expect(invalid.status).toBe(400);
    const corrected = await post(`${test.url}/payments`, { amount: 10 }, { 'Idempotency-Key': key });
    expect(corrected.status).toBe(201);
    expect(runs().of('create')).toBe(before + 1);
    expect(await statusesOf('POST /payments#')).not.toContain('PENDING');
  });

  it('runs again once the completed record has expired (checked in code, not left to TTL)', async () => {
    const key = newKey();
    const first = await post(`${test.url}/payments`, { amount: 4 }, { 'Idempotency-Key': key });
    test.clock.advanceSeconds(86_400);
    const stillReplayed = await post(`${test.url}/payments`, { amount: 4 }, { 'Idempotency-Key': key });
    expect(stillReplayed.text).toBe(first.text);
    test.clock.advanceSeconds(1);
    const after = await post(`${test.url}/payments`, { amount: 4 }, { 'Idempotency-Key': key });
    expect(after.status).toBe(201);
    expect(after.headers.get('idempotent-replayed')).toBeNull();
    expect(after.text).not.toBe(first.text);
  });

  it('never lets an orphaned worker overwrite the result of the worker that took over its lease', async () => {
    const key = newKey();
    const parked = (run: number) => runs().gates.get(`g:${run}`);
    const until = async (condition: () => unknown) => {
      while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
    };

    const orphan = post(`${test.url}/payments/parked/g`, {}, { 'Idempotency-Key': key });
    await until(() => parked(1));
    const blocked = await post(`${test.url}/payments/parked/g`, {}, { 'Idempotency-Key': key });
    expect(blocked.status).toBe(409);

    test.clock.advanceSeconds(7); // the route's 5 s lease and its 1.25 s clock-skew margin are over: the orphan no longer owns the key
    const successor = post(`${test.url}/payments/parked/g`, {}, { 'Idempotency-Key': key });
    await until(() => parked(2));
    parked(2)!();
    const successorResponse = await successor;
    expect(JSON.parse(successorResponse.text)).toEqual({ gate: 'g', run: 2 });

    parked(1)!();
    const orphanResponse = await orphan;
    expect(orphanResponse.status).toBe(201);
    expect(JSON.parse(orphanResponse.text)).toEqual({ gate: 'g', run: 1 }); // its caller still gets its own result

    const replay = await post(`${test.url}/payments/parked/g`, {}, { 'Idempotency-Key': key });
    expect(replay.text).toBe(successorResponse.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(runs().of('parked:g')).toBe(2);
  });

  it("a retry on the owner's own process right after an operator released the key runs at once, not 409", async () => {
    const key = newKey();
    const gate = `released-${keys}`; // a gate of its own: other tests' parked runs are left alone
    const parked = (run: number) => runs().gates.get(`${gate}:${run}`);
    const until = async (condition: () => unknown) => {
      const giveUp = Date.now() + 5000;
      while (!condition() && Date.now() < giveUp) await new Promise((resolve) => setTimeout(resolve, 5));
    };
    const stuck = post(`${test.url}/payments/parked/${gate}`, {}, { 'Idempotency-Key': key });
    await until(() => parked(1));
    const first = 1;
    expect((await post(`${test.url}/payments/parked/${gate}`, {}, { 'Idempotency-Key': key })).status).toBe(409);

    // The operator releases it from elsewhere (the CLI: its own repository and admin, not this app's).
    const { sortKey } = new TableLayout(scenario.layout);
    const admin = new IdempotencyAdmin({
      repository: new DynamoDbIdempotencyRepository({ client, tableName, ...scenario.layout }),
      keyPrefix: scenario.layout.keyPrefix,
      sortKey: sortKey !== undefined,
    });
    expect(await admin.release({ route: 'POST /payments/parked/:gate', key })).toMatchObject({ done: true });

    const next = post(`${test.url}/payments/parked/${gate}`, {}, { 'Idempotency-Key': key });
    const started = await Promise.race([next, until(() => parked(first + 1)).then(() => 'ran the handler')]);
    expect(started).toBe('ran the handler'); // not a 409 until the local lease ends
    parked(first + 1)!();
    const ran = await next;
    expect(ran.status).toBe(201);
    expect(JSON.parse(ran.text)).toEqual({ gate, run: first + 1 });

    parked(first)!(); // the released owner finishes: its caller gets its own answer, its completion is refused
    expect(JSON.parse((await stuck).text)).toEqual({ gate, run: first });
    const replay = await post(`${test.url}/payments/parked/${gate}`, {}, { 'Idempotency-Key': key });
    expect(replay.text).toBe(ran.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });
});
