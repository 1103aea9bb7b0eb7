import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ApolloDriver, ApolloDriverConfig } from '@nestjs/apollo';
import { Injectable } from '@nestjs/common';
import {
  Args,
  Field,
  GraphQLModule,
  GraphQLTimestamp,
  Int,
  Mutation,
  ObjectType,
  Parent,
  Query,
  registerEnumType,
  ResolveField,
  Resolver,
} from '@nestjs/graphql';
import { MercuriusDriver, MercuriusDriverConfig } from '@nestjs/mercurius';
import { GraphQLScalarType } from 'graphql';
import { Idempotent, IdempotencyModule } from 'nestjs-dynamodb-idempotency';
import { Platform, startApp, TestApp } from '../support/app';
import { Dynalite, localClient, startDynalite, uniqueTableName } from '../support/dynalite';
import { createIdempotencyTable } from '../support/table';

/**
 * A replayed mutation is the same GraphQL answer as the first, field for field: Date fields under the DateTime and
 * Timestamp scalars, getters, enums whose values differ from their names, nested object types and lists, nullable
 * fields, a custom JSON scalar; field resolvers run again. Apollo on Express and Mercurius on Fastify, two instances,
 * replay cache off: the replay is decoded from DynamoDB.
 */

enum Currency {
  EUR = 'eur',
  USD = 'usd',
}
registerEnumType(Currency, { name: 'Currency' });

/** A scalar of the application's own: any JSON value, as graphql-type-json defines it. */
const JSONScalar = new GraphQLScalarType({
  name: 'JSON',
  serialize: (value) => value,
  parseValue: (value) => value,
});

@Injectable()
class Runs {
  static count = 0;
  next(): number {
    return ++Runs.count;
  }
}

@ObjectType()
class LineItem {
  @Field() sku!: string;
  @Field(() => Int) cents!: number;
  @Field() addedAt!: Date;

  @Field()
  get label(): string {
    return `${this.sku} (${(this.cents / 100).toFixed(2)})`;
  }
}

@ObjectType()
class Payment {
  @Field() id!: string;
  @Field(() => Int) run!: number;
  @Field(() => Int) cents!: number;
  @Field() createdAt!: Date;
  @Field(() => GraphQLTimestamp) paidAt!: Date;
  @Field(() => Currency) currency!: Currency;
  @Field(() => [LineItem]) items!: LineItem[];
  @Field(() => LineItem, { nullable: true }) gift?: LineItem | null;
  @Field({ nullable: true }) note?: string;
  @Field(() => JSONScalar) metadata!: unknown;
  @Field(() => [Date]) reminders!: Date[];

  @Field()
  get amountFormatted(): string {
    return `${(this.cents / 100).toFixed(2)} ${this.currency.toUpperCase()}`;
  }
}

function lineItem(sku: string, cents: number, addedAt: Date): LineItem {
  return Object.assign(new LineItem(), { sku, cents, addedAt });
}

@Resolver(() => Payment)
class PaymentsResolver {
  static receipts = 0;

  constructor(private readonly runs: Runs) {}

  @Query(() => String)
  health() {
    return 'ok';
  }

  @Mutation(() => Payment)
  @Idempotent()
  pay(@Args('cents', { type: () => Int }) cents: number): Payment {
    const run = this.runs.next();
    const created = new Date(Date.UTC(2026, 11, 1, 12, 0, run));
    return Object.assign(new Payment(), {
      id: `pay_${run}`,
      run,
      cents,
      createdAt: created,
      paidAt: new Date(created.getTime() + 1500),
      currency: Currency.EUR,
      items: [lineItem('tea', 350, created), lineItem('cake', cents - 350, created)],
      gift: null,
      metadata: { channel: 'web', tags: ['a', 'b'], nested: { n: 1 } },
      reminders: [new Date(created.getTime() + 86_400_000)],
    });
  }

  /** A field resolver of the returned type: it runs again on a replay, as it does for any read. */
  @ResolveField(() => String)
  receipt(@Parent() payment: Payment): string {
    PaymentsResolver.receipts += 1;
    return `receipt-${payment.id}`;
  }
}

const PAY = `mutation Pay($cents: Int!) {
  pay(cents: $cents) {
    id run cents createdAt paidAt currency note metadata reminders amountFormatted receipt
    items { sku cents addedAt label }
    gift { sku }
  }
}`;

describe.each([
  ['Apollo on Express', 'express'],
  ['Mercurius on Fastify', 'fastify'],
] as const)('GraphQL replays with %s', (_driver, platform: Platform) => {
  let dynamo: Dynalite;
  let client: DynamoDBClient;
  let a: TestApp;
  let b: TestApp;
  let keys = 0;
  const newKey = () => `gql-types-${platform}-${++keys}`;

  const graphqlModule = () =>
    platform === 'express'
      ? GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          autoSchemaFile: true,
          context: ({ req, res }: never) => ({ req, res }),
        })
      : // cache: false: Mercurius loads its query cache with a dynamic import(), which Jest's CommonJS sandbox refuses.
        GraphQLModule.forRoot<MercuriusDriverConfig>({ driver: MercuriusDriver, autoSchemaFile: true, cache: false });

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localClient(dynamo.endpoint);
    const tableName = uniqueTableName('graphql');
    await createIdempotencyTable(client, tableName);
    const boot = () =>
      startApp(platform, {
        imports: [
          graphqlModule(),
          IdempotencyModule.forRoot({
            client,
            tableName,
            replayCache: { enabled: false },
            // The README's scope: works on GraphQL routes too (the request behind the operation).
            scope: (_context, request) => request?.headers?.['x-tenant'],
          }),
        ],
        providers: [Runs, PaymentsResolver],
      });
    [a, b] = [await boot(), await boot()];
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await dynamo.stop();
  });

  async function graphql(
    app: TestApp,
    query: string,
    variables: Record<string, unknown>,
    headers: Record<string, string> = {},
  ) {
    const response = await fetch(`${app.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as {
      data?: Record<string, any> | null;
      errors?: Array<{ message: string; extensions?: Record<string, any> }>;
    };
    return { replayed: response.headers.get('idempotent-replayed'), ...body };
  }

  it('replays every field exactly as first answered, and the handler ran once', async () => {
    const key = newKey();
    const before = Runs.count;
    const first = await graphql(a, PAY, { cents: 1200 }, { 'idempotency-key': key });
    expect(first.errors).toBeUndefined();
    expect(first.data?.pay).toMatchObject({
      createdAt: expect.stringMatching(/^2026-12-01T12:00:\d\d\.000Z$/),
      paidAt: expect.any(Number),
      currency: 'EUR',
      amountFormatted: '12.00 EUR',
      items: [
        { sku: 'tea', label: 'tea (3.50)' },
        { sku: 'cake', label: 'cake (8.50)' },
      ],
      gift: null,
      note: null,
      metadata: { channel: 'web', tags: ['a', 'b'], nested: { n: 1 } },
    });
    const receiptsBefore = PaymentsResolver.receipts;
    const replay = await graphql(b, PAY, { cents: 1200 }, { 'idempotency-key': key });
    expect(replay.errors).toBeUndefined();
    expect(replay.data).toEqual(first.data);
    expect(replay.replayed).toBe('true');
    expect(first.replayed).toBeNull();
    expect(Runs.count).toBe(before + 1);
    expect(PaymentsResolver.receipts).toBe(receiptsBefore + 1); // the field resolver ran again for the replay
  });

  it('a retry that selects other fields of the type gets them from the stored result', async () => {
    const key = newKey();
    await graphql(a, 'mutation { pay(cents: 800) { id } }', {}, { 'idempotency-key': key });
    const retry = await graphql(
      b,
      'mutation { pay(cents: 800) { id amountFormatted createdAt items { addedAt label } } }',
      {},
      { 'idempotency-key': key },
    );
    expect(retry.errors).toBeUndefined();
    expect(retry.data?.pay).toMatchObject({
      amountFormatted: '8.00 EUR',
      items: [{ label: 'tea (3.50)' }, { label: 'cake (4.50)' }],
    });
    expect(retry.replayed).toBe('true');
  });

  it('problems are the same GraphQL errors on both drivers', async () => {
    const missing = await graphql(a, PAY, { cents: 1 });
    expect(missing.data ?? null).toBeNull();
    expect(missing.errors?.[0].extensions).toMatchObject({ code: 'IDEMPOTENCY_KEY_MISSING', status: 400 });
    const key = newKey();
    await graphql(a, PAY, { cents: 5 }, { 'idempotency-key': key });
    const mismatch = await graphql(b, PAY, { cents: 6 }, { 'idempotency-key': key });
    expect(mismatch.errors?.[0].extensions).toMatchObject({ code: 'IDEMPOTENCY_FINGERPRINT_MISMATCH', status: 422 });
  });

  it('scopes keys by the request behind the operation (the README scope), so tenants never share a result', async () => {
    const key = newKey();
    const before = Runs.count;
    const first = await graphql(a, PAY, { cents: 700 }, { 'idempotency-key': key, 'x-tenant': 'acme' });
    const other = await graphql(b, PAY, { cents: 700 }, { 'idempotency-key': key, 'x-tenant': 'globex' });
    expect(other.replayed).toBeNull();
    expect(other.data?.pay.id).not.toBe(first.data?.pay.id);
    expect((await graphql(b, PAY, { cents: 700 }, { 'idempotency-key': key, 'x-tenant': 'acme' })).data).toEqual(
      first.data,
    );
    expect(Runs.count).toBe(before + 2);
  });
});
