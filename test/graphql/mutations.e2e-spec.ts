import { setTimeout as sleep } from 'node:timers/promises';
import { ApolloDriver, ApolloDriverConfig } from '@nestjs/apollo';
import { HttpException, Injectable } from '@nestjs/common';
import { Args, Field, GraphQLModule, InputType, Int, Mutation, ObjectType, Query, Resolver } from '@nestjs/graphql';
import { Idempotent, IdempotencyModule, IdempotencyOutcomeEvent } from 'nestjs-dynamodb-idempotency';
import { startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';

@Injectable()
class Runs {
  static count = 0;
  next(): number {
    return ++Runs.count;
  }
}

@ObjectType()
class Payment {
  @Field() id!: string;
  @Field(() => Int) amount!: number;
  /** Which execution of a handler produced it: a replay shows the first one's. */
  @Field(() => Int) run!: number;
}

@InputType()
class PayInput {
  @Field() requestId!: string;
  @Field(() => Int) amount!: number;
}

@Resolver(() => Payment)
class PaymentsResolver {
  constructor(private readonly runs: Runs) {}

  @Query(() => String)
  health() {
    return 'ok';
  }

  @Mutation(() => Payment)
  @Idempotent()
  async pay(
    @Args('amount', { type: () => Int }) amount: number,
    @Args('delayMs', { type: () => Int, nullable: true }) delayMs?: number,
  ) {
    const run = this.runs.next();
    if (delayMs) await sleep(delayMs);
    return { id: `pay_${run}`, amount, run };
  }

  @Mutation(() => Payment)
  @Idempotent({ keyFrom: { arg: 'input.requestId' } })
  payWithInput(@Args('input') input: PayInput) {
    const run = this.runs.next();
    return { id: `pay_${run}`, amount: input.amount, run };
  }

  /** What makes two calls the same is the amount: a client's `note` may change between retries. */
  @Mutation(() => Payment)
  @Idempotent({ fingerprint: (args: { amount: number; note?: string }) => ({ amount: args.amount }) })
  payWithNote(@Args('amount', { type: () => Int }) amount: number, @Args('note', { nullable: true }) _note?: string) {
    const run = this.runs.next();
    return { id: `pay_${run}`, amount, run };
  }

  @Mutation(() => Payment)
  @Idempotent()
  decline(@Args('amount', { type: () => Int }) _amount: number) {
    this.runs.next();
    throw new HttpException({ code: 'card_declined', message: 'Your card was declined.' }, 402);
  }
}

/** A class-level @Idempotent() on a resolver protects its mutations, not its queries. */
@Resolver()
@Idempotent()
class RefundsResolver {
  constructor(private readonly runs: Runs) {}

  @Query(() => Int)
  refundCount() {
    return this.runs.next();
  }

  @Mutation(() => Int)
  refund(@Args('amount', { type: () => Int }) _amount: number) {
    return this.runs.next();
  }
}

describe('GraphQL mutations (Apollo driver on Express)', () => {
  let dynamo: Dynalite;
  let tableName: string;
  let a: TestApp;
  let b: TestApp;
  let keys = 0;
  const newKey = () => `gql-${++keys}`;
  const events: IdempotencyOutcomeEvent[] = [];

  /** An instance without replay cache, so a duplicate on the other one is read back from dynalite. */
  const boot = () =>
    startApp('express', {
      imports: [
        GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          autoSchemaFile: true,
          context: ({ req, res }: never) => ({ req, res }),
        }),
        IdempotencyModule.forRoot({
          client: localClient(dynamo.endpoint),
          tableName,
          replayCache: { enabled: false },
          onOutcome: (event) => events.push(event),
        }),
      ],
      providers: [Runs, PaymentsResolver, RefundsResolver],
    });

  beforeAll(async () => {
    dynamo = await startDynalite();
    tableName = uniqueTableName('graphql');
    await createIdempotencyTable(localClient(dynamo.endpoint), tableName);
    [a, b] = [await boot(), await boot()];
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await dynamo.stop();
  });

  async function graphql(app: TestApp, query: string, variables: Record<string, unknown>, key?: string) {
    const response = await fetch(`${app.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as {
      data?: Record<string, any> | null;
      errors?: Array<{ message: string; extensions?: Record<string, any> }>;
    };
    return { status: response.status, replayed: response.headers.get('idempotent-replayed'), ...body };
  }
  const PAY =
    'mutation Pay($amount: Int!, $delayMs: Int) { pay(amount: $amount, delayMs: $delayMs) { id amount run } }';
  const PAY_WITH_INPUT = 'mutation Pay($input: PayInput!) { payWithInput(input: $input) { id amount run } }';

  it('runs a mutation once per Idempotency-Key header; the other instance replays its result from DynamoDB', async () => {
    const key = newKey();
    const first = await graphql(a, PAY, { amount: 42 }, key);
    const retry = await graphql(b, PAY, { amount: 42 }, key);
    expect(first.errors).toBeUndefined();
    expect(first.data).toEqual({
      pay: { id: expect.stringMatching(/^pay_\d+$/), amount: 42, run: expect.any(Number) },
    });
    expect(retry.data).toEqual(first.data);
    expect(first.replayed).toBeNull();
    expect(retry.replayed).toBe('true');
  });

  it('takes the key from an argument with keyFrom, and refuses the same key with other arguments (fingerprint)', async () => {
    const requestId = newKey();
    const first = await graphql(a, PAY_WITH_INPUT, { input: { requestId, amount: 7 } });
    const retry = await graphql(b, PAY_WITH_INPUT, { input: { requestId, amount: 7 } });
    expect(retry.data).toEqual(first.data);
    expect(first.data?.payWithInput.run).toBe(retry.data?.payWithInput.run);

    const other = await graphql(b, PAY_WITH_INPUT, { input: { requestId, amount: 8 } });
    expect(other.data).toBeNull();
    expect(other.errors?.[0].extensions).toMatchObject({
      code: 'IDEMPOTENCY_FINGERPRINT_MISMATCH',
      type: 'urn:nestjs-dynamodb-idempotency:fingerprint-mismatch',
      status: 422,
    });
  });

  it('takes the fingerprint the mutation chose: a retry with another note replays, another amount is refused', async () => {
    const PAY_WITH_NOTE =
      'mutation Pay($amount: Int!, $note: String) { payWithNote(amount: $amount, note: $note) { id amount run } }';
    const key = newKey();
    const first = await graphql(a, PAY_WITH_NOTE, { amount: 3, note: 'first try' }, key);
    const retry = await graphql(b, PAY_WITH_NOTE, { amount: 3, note: 'second try' }, key);
    expect(first.errors).toBeUndefined();
    expect(retry.data).toEqual(first.data);
    expect(retry.replayed).toBe('true');
    const other = await graphql(b, PAY_WITH_NOTE, { amount: 4, note: 'first try' }, key);
    expect(other.errors?.[0].extensions).toMatchObject({ code: 'IDEMPOTENCY_FINGERPRINT_MISMATCH', status: 422 });
  });

  it('reports each mutation call to onOutcome as the graphql transport: executed on one instance, replayed on the other', async () => {
    const key = newKey();
    const before = events.length;
    await graphql(a, PAY, { amount: 9 }, key);
    await graphql(b, PAY, { amount: 9 }, key);
    expect(events.slice(before)).toEqual([
      expect.objectContaining({
        outcome: 'executed',
        transport: 'graphql',
        operation: 'GraphQL Mutation.pay',
        statusCode: 200,
      }),
      expect.objectContaining({
        outcome: 'replayed',
        transport: 'graphql',
        operation: 'GraphQL Mutation.pay',
        statusCode: 200,
      }),
    ]);
  });

  it('answers a mutation without a key with IDEMPOTENCY_KEY_MISSING, and never runs it', async () => {
    const before = Runs.count;
    const missing = await graphql(a, PAY, { amount: 1 });
    expect(missing.errors?.[0].extensions).toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING', status: 400 });
    expect(missing.errors?.[0].message).toMatch(/requires an Idempotency-Key header/);
    expect(Runs.count).toBe(before);
  });

  it('answers a duplicate on the other instance while the first runs with IDEMPOTENCY_IN_FLIGHT and retryAfter', async () => {
    const key = newKey();
    const running = graphql(a, PAY, { amount: 5, delayMs: 400 }, key);
    await sleep(100);
    const duplicate = await graphql(b, PAY, { amount: 5, delayMs: 400 }, key);
    expect(duplicate.errors?.[0].extensions).toMatchObject({
      code: 'IDEMPOTENCY_IN_FLIGHT',
      status: 409,
      retryAfter: 1,
    });
    expect((await running).errors).toBeUndefined();
  });

  it('replays a final error (a 402 HttpException) as the same GraphQL error, without running again', async () => {
    const key = newKey();
    const DECLINE = 'mutation Decline($amount: Int!) { decline(amount: $amount) { id } }';
    const before = Runs.count;
    const first = await graphql(a, DECLINE, { amount: 9 }, key);
    const retry = await graphql(b, DECLINE, { amount: 9 }, key);
    expect(first.errors?.[0].message).toBe('Your card was declined.');
    expect(retry.errors).toEqual(first.errors);
    expect(retry.replayed).toBe('true');
    expect(Runs.count).toBe(before + 1);
  });

  it('a class-level @Idempotent() on a resolver protects its mutations and leaves its queries alone', async () => {
    const query = await graphql(a, '{ refundCount }', {});
    expect(query.errors).toBeUndefined();
    const missing = await graphql(a, 'mutation { refund(amount: 3) }', {});
    expect(missing.errors?.[0].extensions?.code).toBe('IDEMPOTENCY_KEY_MISSING');
    const key = newKey();
    const first = await graphql(a, 'mutation { refund(amount: 3) }', {}, key);
    const retry = await graphql(b, 'mutation { refund(amount: 3) }', {}, key);
    expect(retry.data).toEqual(first.data);
    expect(retry.replayed).toBe('true');
  });
});
