import { IdempotencyRecord } from '../repository/idempotency.record';
import { finalFailureKind } from './record-report';

/**
 * When a removal takes effect: at once in the store and in the process whose `IdempotencyAdmin` made it; a process
 * that cached the answer replays it until its entry's `replayCache.maxAgeSeconds` (default 10 s) has passed.
 */
export const TAKES_EFFECT =
  'processes that cached the answer replay it for at most replayCache.maxAgeSeconds more (default 10 s)';

/** What `keys:release` tells the operator, by the record it read (what happens to its steps is added to it). */
export function releaseNote(record: IdempotencyRecord): string {
  if (record.status === 'PENDING') {
    return "released: the next request runs the handler, in any process (the owner's own included). If its owner is still running, its completion will be refused (lease lost) and its caller still gets its own answer";
  }
  if (record.status === 'COMPLETED') return `released: the next request runs the handler again; ${TAKES_EFFECT}`;
  switch (finalFailureKind(record)) {
    case 'key-poisoned':
      return 'released a poisoned key: the next request runs the handler';
    case 'step-outcome-unknown':
      return (
        'released an unknown step outcome: the next request meets the interrupted step again (its probe asks once ' +
        'more, or the outcome is unknown again); keys:resolve-step settles it'
      );
    default:
      return 'released: the next request runs the handler';
  }
}
