import { Dynalite, startDynalite } from './dynalite';

/**
 * The DynamoDB APIs the suites run on: dynalite (in-process, fast) always, AWS's DynamoDB Local too when the
 * global setup started one (java 17+ on PATH).
 */
export type Engine = 'dynalite' | 'dynamodb-local';

const dynamoDbLocalEndpoint = process.env.DYNAMODB_LOCAL_ENDPOINT;
export const ENGINES: Engine[] = dynamoDbLocalEndpoint ? ['dynalite', 'dynamodb-local'] : ['dynalite'];

/** `describe` for suites that need DynamoDB Local; skipped (and listed as skipped) without it. */
export const describeOnDynamoDbLocal = dynamoDbLocalEndpoint ? describe : describe.skip;

/** An endpoint of the engine: a new dynalite, or the run's shared DynamoDB Local (tests use their own tables there). */
export async function startStore(engine: Engine): Promise<Dynalite> {
  if (engine === 'dynalite') return startDynalite();
  if (!dynamoDbLocalEndpoint) throw new Error('DynamoDB Local is not running (see test/support/global-setup.ts)');
  return { endpoint: dynamoDbLocalEndpoint, stop: async () => undefined };
}

/** Each platform on dynalite, and Express on DynamoDB Local when it runs: the core HTTP cases run on both engines. */
export const PLATFORM_ENGINES: ['express' | 'fastify', Engine][] = [
  ['express', 'dynalite'],
  ['fastify', 'dynalite'],
  ...(dynamoDbLocalEndpoint ? [['express', 'dynamodb-local'] as ['express', Engine]] : []),
];
