import { randomUUID } from 'node:crypto';
import { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { IdempotencyModule, OneTimeTokens } from 'nestjs-dynamodb-idempotency';
import { localClient, uniqueTableName } from '../support/dynalite';
import { ENGINES, startStore } from '../support/engines';
import { createIdempotencyTable } from '../support/table';

/**
 * `OneTimeTokens.consume`: a token (an MCP request's `requestState`, a confirmation link) is consumed once across
 * instances on one table, whatever the number of concurrent tries; its purpose and its caller's scope keep tokens apart.
 */
describe.each(ENGINES)('OneTimeTokens across two instances (%s)', (engine) => {
  let endpoint: string;
  let stop: () => Promise<void>;
  let instances: INestApplicationContext[];

  beforeAll(async () => {
    ({ endpoint, stop } = await startStore(engine));
    const tableName = uniqueTableName('once');
    await createIdempotencyTable(localClient(endpoint), tableName);
    instances = await Promise.all(
      [1, 2].map(async () => {
        const moduleRef = await Test.createTestingModule({
          imports: [IdempotencyModule.forRoot({ client: localClient(endpoint), tableName })],
        }).compile();
        return moduleRef.init();
      }),
    );
  });
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
    await stop();
  });

  const tokens = (i: number) => instances[i % 2].get(OneTimeTokens);

  it('eight concurrent tries on two instances: one consumes the token, seven are told it was consumed', async () => {
    const token = randomUUID();
    const results = await Promise.all([...Array(8).keys()].map((i) => tokens(i).consume(token)));
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await tokens(1).consume(token)).toBe(false);
  });

  it('the same token for another purpose or another caller is another token', async () => {
    const token = randomUUID();
    expect(await tokens(0).consume(token, { purpose: 'request state' })).toBe(true);
    expect(await tokens(1).consume(token, { purpose: 'password reset' })).toBe(true);
    expect(await tokens(1).consume(token, { purpose: 'request state', scope: 'bob' })).toBe(true);
    expect(await tokens(0).consume(token, { purpose: 'request state' })).toBe(false);
  });

  it('an empty token is refused before anything is written', async () => {
    await expect(tokens(0).consume('')).rejects.toThrow('the token must be a non-empty string');
  });
});
