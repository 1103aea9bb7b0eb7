import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDbIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { recordKey } from '../../libs/idempotency/src/keys/record-key';
import { testClock } from '../support/clock';
import { Dynalite, localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { createIdempotencyTable } from '../support/table';

const response = { statusCode: 200, headers: {}, body: { charged: true } };

/**
 * Another request's claim reads a lease past its end and sends the restart form on what it read; between the two, the
 * lease's owner fails, keeping its step for its own request's retry (the record keeps its claim token). The restart
 * form takes over only the record as read, status included: the claim reads again and is refused (the steps are held
 * for their request), and that request's retry resumes them.
 */
describe.each(ENGINES)('a restart form racing the owner’s failure (%s)', (engine) => {
  let store: Dynalite;
  beforeAll(async () => {
    store = await startStore(engine);
  }, 60_000);
  afterAll(() => store.stop());

  it('is refused: the failed record keeps its steps for its own request, whose retry resumes them', async () => {
    const tableName = uniqueTableName('restart_race');
    const plain = localClient(store.endpoint);
    await createIdempotencyTable(plain, tableName);
    const clock = testClock();
    const owner = new DynamoDbIdempotencyRepository({ client: plain, tableName, clock });
    const key = recordKey('POST /payments', undefined, 'restart-race');
    const claim = await owner.claim({ key, fingerprint: 'charge-100', leaseSeconds: 30, clockSkewSeconds: 2 });
    if (!claim.claimed) throw new Error('the first claim must win');
    const step = { name: 'charge', result: response, attempt: 1, run: claim.run ?? 1 };
    expect(await owner.recordStep({ key, claimToken: claim.claimToken, step })).toEqual({ ok: true });
    clock.advanceSeconds(33); // the lease is past its end and the 2 s margin

    // The other request's client: the owner's failure lands just before its restart form is sent.
    const racing = localClient(store.endpoint) as DynamoDBClient;
    let failed: unknown;
    racing.middlewareStack.add(
      (next, context) => async (args) => {
        const values = (args.input as { ExpressionAttributeValues?: Record<string, unknown> })
          .ExpressionAttributeValues;
        if (context.commandName === 'UpdateItemCommand' && values?.[':readToken'] && failed === undefined) {
          failed = await owner.fail({ key, claimToken: claim.claimToken, ttlSeconds: 3600 });
        }
        return next(args);
      },
      { step: 'initialize', name: 'ownerFailsBeforeRestart' },
    );
    const other = new DynamoDbIdempotencyRepository({ client: racing, tableName, clock });
    const taken = await other.claim({ key, fingerprint: 'charge-999', leaseSeconds: 30, clockSkewSeconds: 2 });
    expect(failed).toMatchObject({ ok: true }); // the race happened: the restart form was sent after the failure
    expect(taken).toMatchObject({ claimed: false, existing: { status: 'FAILED', fingerprint: 'charge-100' } });

    const retry = await owner.claim({ key, fingerprint: 'charge-100', leaseSeconds: 30, clockSkewSeconds: 2 });
    expect(retry).toMatchObject({ claimed: true, steps: [{ name: 'charge', result: response }] });
  });
});
