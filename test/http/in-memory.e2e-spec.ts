import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';
import { post, startApp } from '../support/app';
import { testClock } from '../support/clock';
import { paymentsModule, Runs } from './payments.fixture';

describe("the module with the in-memory repository (for users' own unit tests)", () => {
  it('replays without any DynamoDB behind it', async () => {
    const unreachable = new DynamoDBClient({ endpoint: 'http://127.0.0.1:9', region: 'us-east-1' });
    const clock = testClock();
    const repository = new InMemoryIdempotencyRepository(clock);
    const test = await startApp('express', paymentsModule(unreachable, 'unused', { repository }), { clock });
    try {
      const first = await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': 'k' });
      const second = await post(`${test.url}/payments`, { amount: 1 }, { 'Idempotency-Key': 'k' });
      expect(first.status).toBe(201);
      expect(second.text).toBe(first.text);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(test.get(Runs).of('create')).toBe(1);
    } finally {
      await test.close();
    }
  });
});
