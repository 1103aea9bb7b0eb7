import { Test } from '@nestjs/testing';
import { IdempotencyModule, IdempotencyService, InMemoryIdempotencyRepository } from 'nestjs-dynamodb-idempotency';

/**
 * Runs `use` against an `IdempotencyService` on a fresh in-memory repository (or the one given), the replay cache off
 * (so every duplicate reaches the store), and closes the module afterwards.
 */
export async function withInMemoryService<T>(
  use: (service: IdempotencyService) => Promise<T>,
  repository: InMemoryIdempotencyRepository = new InMemoryIdempotencyRepository(),
): Promise<T> {
  const moduleRef = await Test.createTestingModule({
    imports: [IdempotencyModule.forRoot({ repository, replayCache: { enabled: false } })],
  }).compile();
  try {
    return await use((await moduleRef.init()).get(IdempotencyService));
  } finally {
    await moduleRef.close();
  }
}
