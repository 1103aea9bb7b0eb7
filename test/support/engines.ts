import { Dynalite, startDynalite } from './dynalite';
import { LayoutName } from './layouts';

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

/**
 * Where the core HTTP cases run: each platform on dynalite, Express on DynamoDB Local when it runs, and Express on the
 * single-table layout (PK/SK, a key prefix, renamed attributes) on both engines.
 */
export const PLATFORM_ENGINES: ['express' | 'fastify', Engine, LayoutName][] = [
  ['express', 'dynalite', 'default'],
  ['fastify', 'dynalite', 'default'],
  ...(dynamoDbLocalEndpoint ? [['express', 'dynamodb-local', 'default'] as ['express', Engine, LayoutName]] : []),
  ['express', 'dynalite', 'single-table'],
  ...(dynamoDbLocalEndpoint ? [['express', 'dynamodb-local', 'single-table'] as ['express', Engine, LayoutName]] : []),
];
