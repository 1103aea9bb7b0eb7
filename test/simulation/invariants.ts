/**
 * The invariants the module keeps, as docs/invariants.md states them (a test checks that the page says each one word
 * for word): the simulation (./fleet.ts) checks every one after every step.
 */
export const INVARIANTS = {
  'one-execution':
    'One execution per key: a lease-mode run starts only when no other run of the key holds an unexpired lease and no run has completed the key since its last release point (a non-final error, an operator’s release or purge, the record’s expiry).',
  'one-answer':
    'One answer per key: once a key completed, every answer for it from any process is the stored response (or the answer of the caller whose own run it was, or a documented error); in optimistic mode a duplicate whose own run failed gets the stored response.',
  'purge-honoured':
    'A purge is honoured: after an operator removes a completed record, the process that removed it never answers the removed response again, and no other process does once replayCache.maxAgeSeconds has passed.',
  'invocation-ends-settled':
    'An AWS Lambda invocation (withLambdaContext) ends only once every protected call it started has settled, unless its deadline came first.',
  'in-flight-held':
    'A 409 in-flight answer means the key is held: a PENDING record or a live run that claimed it after its last release.',
  'admin-finds-keys':
    'The admin finds every key: an operator’s command that names a call’s operation, key and scope (a number typed as its digits) reaches the record the module wrote for it.',
  'steps-resume':
    'A step runs once per request: its function never starts in a run whose record already holds its result, nor again for the same request before its record expires, and a run that owns the record gets the recorded result.',
  'own-items-only':
    'Only its own items: nothing the module does (requests, sweeps, operators’ commands) changes an item of the table that is not one of its records.',
  'admin-conditional':
    'An operator changes only what it read: a release or purge removes a record only if it is still the one the command read (the same claim, the same state); one that changed meanwhile is left as it is.',
  'writes-fenced':
    'Every write lands only where it may, whatever the answers say: a completion, failure, renewal or step only on the PENDING record its own claim owns; a claim only over a lease past its end by the clock-skew margin, a completed record past its expiry or a failed one (a poisoned one only once it expired; one that holds recorded steps only for its own request, until it expires), and with steps only those of its own request (and, for a versioned claim that refuses another version’s steps, of its own version); a sweep only on a lease past its end by the margin; an operator’s command only on the record as it read it; and a completion or failure keeps the record as long as it asked.',
  'in-flight-indexed':
    'The index of keys in flight holds exactly the keys in flight: every PENDING record carries its shard, and no finished or removed one does, after every write.',
  'poison-capped':
    'A poisoned key is capped, and only a poisoned one: a handler never starts under a claim that took a lease over after maxCrashedOwners owners of the key in a row crashed (since its last clean end: a completion, an owner’s own release, or the record’s removal), and only such a claim stores a key as poisoned.',
  'at-most-once':
    'An at-most-once step runs at most once per record: its function starts only once its start is recorded, and never again over that start unless its probe said the effect did not happen or an operator forgot the step (a run’s own retries aside); an unknown outcome is stored only over a start.',
} as const;

export type InvariantId = keyof typeof INVARIANTS;
