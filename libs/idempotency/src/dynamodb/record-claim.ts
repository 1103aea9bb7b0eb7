import { randomUUID } from 'node:crypto';
import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { IdempotencyInFlightError, IdempotencyStoreUnavailableError } from '../errors/idempotency.errors';
import { MAX_CLAIM_ATTEMPTS } from '../idempotency.constants';
import { claimableBy, IdempotencyRecord, versionChange } from '../repository/idempotency.record';
import { ClaimInput, ClaimResult } from '../repository/idempotency.repository';
import { RecordRead, restartClaimRequest, resumeClaimRequest } from './claim-requests';
import type { CompletedPutStore } from './completed-put';
import { isConditionalCheckFailed, isReplicatedWriteConflict } from './dynamodb-errors';
import { recordFromItem } from './item-mapping';

/**
 * The claim (1) as the DynamoDB repository sends it: the resume form first (its steps come back); the restart form
 * only after that lost to a claimable record of another request (`claim-requests.ts`). A lost race is a value; a record
 * that turned claimable while it was read (expired, released, deleted by TTL) is claimed again, a few times.
 */
export async function claimRecord(store: CompletedPutStore, claim: ClaimInput): Promise<ClaimResult> {
  const { key, partition, fingerprint, clockSkewSeconds = 0 } = claim;
  const { calls, tableName, layout } = store;
  let restarting: RecordRead | undefined;
  for (let attempt = 1; ; attempt++) {
    const claimToken = randomUUID();
    const now = store.nowSeconds();
    try {
      const request = { claim, claimToken, nowSeconds: now };
      const command =
        restarting === undefined
          ? resumeClaimRequest(tableName, layout, request)
          : restartClaimRequest(tableName, layout, request, restarting);
      const { Attributes } = await calls.send('claim', new UpdateItemCommand(command));
      const resumed = Attributes && recordFromItem(layout, Attributes);
      return won(claimToken, resumed);
    } catch (error) {
      // Another Region wrote the item at the same moment (multi-Region strong consistency): contention, like a
      // lost race whose winner is not known yet. Claimed again, then reported in flight, never a duplicate.
      if (isReplicatedWriteConflict(error)) {
        if (attempt >= MAX_CLAIM_ATTEMPTS) throw new IdempotencyInFlightError(1);
        continue;
      }
      if (!isConditionalCheckFailed(error)) throw error;
      store.refused();
      const existing = await store.existing({ key, partition }, error);
      // The SDK retried a claim whose first attempt timed out but landed: that attempt was ours.
      if (existing?.claimToken === claimToken) {
        const { steps = [], startedSteps = [] } = existing;
        return { claimed: true, claimToken, run: existing.runs ?? 1, steps, startedSteps };
      }
      const blocking = existing && !claimableBy(existing, fingerprint, store.nowSeconds(), clockSkewSeconds);
      // Gone (TTL deleted it), expired or failed since the condition was checked: claim again, a few times.
      if (existing && (blocking || attempt >= MAX_CLAIM_ATTEMPTS)) return { claimed: false, existing };
      if (attempt >= MAX_CLAIM_ATTEMPTS) throw new IdempotencyStoreUnavailableError('claim', 'ClaimContention');
      // Claimable: the same request unfinished is resumed; another request's record, or a finished one, restarted.
      const resumable = existing?.status !== 'COMPLETED' && existing?.fingerprint === fingerprint;
      // Steps of another version of the code: refused (the record comes back as it is), or restarted without them.
      const otherVersion = resumable && versionChange(claim, existing);
      if (otherVersion === 'refuse') return { claimed: false, existing: existing! };
      restarting = existing && (!resumable || otherVersion === 'restart') ? existing : undefined;
    }
  }
}

/**
 * A won claim, from the record it replaced (a resume's old item; none for a new key or a restart): its run, its steps,
 * and when it took over a lease, the owners that crashed (every owner since the last clean end; a record written before
 * owners were kept: its holder).
 */
function won(claimToken: string, resumed: IdempotencyRecord | undefined): ClaimResult {
  if (!resumed) return { claimed: true, claimToken, run: 1, steps: [] };
  const run = Math.max(1, (resumed.runs ?? 0) + 1);
  const { steps = [], startedSteps = [] } = resumed;
  if (resumed.status !== 'PENDING') return { claimed: true, claimToken, run, steps, startedSteps };
  const takenOver = resumed.owners ?? [resumed.holder ?? ''];
  return { claimed: true, claimToken, run, steps, startedSteps, takenOver };
}
