// For `npm run test:package`: the repository contract run through the published entry point
// (`nestjs-dynamodb-idempotency/testing`) on Node's own test runner, as a user who brings their own store would.
import { beforeEach, describe, it } from 'node:test';
import { describeRepositoryContract, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency/testing';

describeRepositoryContract('in-memory, from the package', async (clock) => new InMemoryIdempotencyRepository(clock), {
  describe,
  it,
  beforeEach,
});
