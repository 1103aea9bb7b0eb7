/** The defaults: replay for a day, a one-minute lease, failed attempts remembered briefly. */
export const DEFAULT_TABLE_NAME = 'idempotency_keys';
export const DEFAULT_TTL_SECONDS = 86_400;
export const DEFAULT_PENDING_TTL_SECONDS = 60;
export const DEFAULT_FAILED_TTL_SECONDS = 300;
/** A live owner renews its lease for at most an hour: a hung handler cannot block its key forever. */
export const DEFAULT_MAX_LEASE_SECONDS = 3600;
/**
 * A key whose last 3 owners crashed while running it (took their process down, or ran out their lease) is poisoned: the
 * handler is not run for it a fourth time (`maxCrashedOwners`).
 */
export const DEFAULT_MAX_CRASHED_OWNERS = 3;
/** A live owner keeps renewing its lease, so a duplicate is told to look again soon, not when the lease ends. */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;
/**
 * The retrying client's default budget for one logical call: longer than a crashed owner's key answers 409 on the
 * module's defaults (the 60 s lease and its clock-skew margin), so a client on defaults gets the answer, not the 409.
 */
export const DEFAULT_CLIENT_MAX_ELAPSED_MS = 90_000;
export const DEFAULT_KEY_HEADER = 'Idempotency-Key';
export const DEFAULT_REPLAY_HEADERS: readonly string[] = ['content-type', 'location'];
export const DEFAULT_REPLAY_CACHE_ENTRIES = 1000;
/**
 * How long a cached COMPLETED record is trusted without reading DynamoDB: an operator's purge or forced release done
 * elsewhere takes effect in this process within this bound.
 */
export const DEFAULT_REPLAY_CACHE_MAX_AGE_SECONDS = 10;
/** On AWS Lambda: a container serves one request at a time and lives minutes, so a few entries do. */
export const LAMBDA_REPLAY_CACHE_ENTRIES = 100;

/** Set on every replayed response (Stripe's name, also used by the IETF draft's examples). */
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/** Keys are user input: bound them. */
export const MAX_KEY_LENGTH = 255;

/** DynamoDB rejects items over 400 KB; leave room for the other attributes. */
export const MAX_STORED_RESPONSE_BYTES = 380 * 1024;
/**
 * Responses above this (as JSON) are gzipped before storing. DynamoDB bills a write per KB of the item (and a refused
 * claim over a completed item per KB of that item): above about 0.7 KB a response makes the item (with its other
 * attributes) larger than 1 KB, and typical JSON gzips 3–6 times, so this is where compression starts saving units
 * (measured: bench/RESULTS.md, capacity units).
 */
export const COMPRESS_RESPONSE_ABOVE_BYTES = 700;

/** How often a lost claim is retried when the existing item turns out to be claimable (gone, expired, failed). */
export const MAX_CLAIM_ATTEMPTS = 3;

/** Seconds a client is told to wait after the store throttled or failed. */
export const STORE_RETRY_AFTER_SECONDS = 1;

/**
 * A recorded step takes at most this much of the record, counted as DynamoDB counts an item: its name and its result
 * as stored (compressed once large, sealed with `encryption`), plus its entry's own attributes.
 */
export const MAX_STEP_RESULT_BYTES = 32 * 1024;
/** All the steps of one request share this much of the record (its response keeps the rest of the 400 KB item). */
export const MAX_STEPS_BYTES = 64 * 1024;
/**
 * What a step's entry in the record's `steps` map takes besides its name and its stored result, as DynamoDB counts it:
 * the entry's map (3), an element's byte each (6), its attribute names (`value`/`sealed`, `at`, `attempt`, `run`, `seq`:
 * at most 21), the time (10 digits) and three counts (attempt, run, place: under a million each, 18 digits together):
 * 58, with room to spare.
 */
export const STEP_ENTRY_OVERHEAD_BYTES = 100;
/** Step names are at most this long. */
export const MAX_STEP_NAME_LENGTH = 255;
