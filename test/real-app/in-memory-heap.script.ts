/**
 * Run by in-memory-heap.e2e-spec.ts in a child process with --expose-gc: the heap of an InMemoryIdempotencyRepository
 * after a steady stream of keys, before and after 20,000 more keys that all pass their TTL. Prints JSON.
 */
import { InMemoryIdempotencyRepository } from '../../libs/idempotency/src/repository/in-memory-idempotency.repository';
import { ManualClock } from '../../libs/idempotency/src/testing/manual-clock';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

const clock = new ManualClock();
const repository = new InMemoryIdempotencyRepository(clock);
const TTL_SECONDS = 10;
const KEYS_PER_SECOND = 100;

/** `count` keys claimed and completed, 100 a second of the repository's clock, each kept for 10 s. */
async function stream(prefix: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const key = `${prefix}-${i}`;
    const claim = await repository.claim({ key, fingerprint: 'f'.repeat(64), leaseSeconds: 60 });
    if (!claim.claimed) throw new Error(`${key} was not claimed`);
    const response = {
      statusCode: 201,
      headers: { 'content-type': 'application/json' },
      body: { id: key, note: 'x'.repeat(200) },
    };
    await repository.complete({ key, claimToken: claim.claimToken, response, ttlSeconds: TTL_SECONDS });
    if (i % KEYS_PER_SECOND === KEYS_PER_SECOND - 1) clock.advanceSeconds(1);
  }
}

function heapUsed(): number {
  for (let i = 0; i < 3; i++) gc!();
  return process.memoryUsage().heapUsed;
}

void (async () => {
  await stream('warm', 2_000); // the steady state: about 10 s of keys alive
  const start = heapUsed();
  const sizeAtStart = repository.size;
  await stream('key', 20_000);
  const end = heapUsed();
  console.log(JSON.stringify({ start, end, sizeAtStart, sizeAtEnd: repository.size }));
})();
