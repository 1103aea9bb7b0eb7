import { CheckId } from './checks';
import type { ProfileName } from './options';

/** One row of a profile: a check, how strongly the source asks for it, and where it says so. */
export interface Requirement {
  check: CheckId;
  level: 'MUST' | 'SHOULD' | 'documented' | 'precondition';
  source: string;
}

const IETF = 'draft-ietf-httpapi-idempotency-key-header-07';
const STRIPE = 'docs.stripe.com/api/idempotent_requests';

/**
 * The profiles: which checks each one makes, at what level, citing its source. `module` is this module's whole
 * contract (docs/replays.md, docs/keys-and-fingerprints.md, docs/invariants.md); `ietf-07` the draft's requirements a
 * client can observe; `stripe` Stripe's documented behaviour. A check a profile leaves out is not judged under it.
 */
export const PROFILES: Record<ProfileName, Requirement[]> = {
  module: [
    { check: 'repeat.succeeds', level: 'precondition', source: '--url, --body' },
    { check: 'repeat.same-answer', level: 'MUST', source: 'docs/replays.md' },
    { check: 'repeat.replay-marker', level: 'MUST', source: 'docs/replays.md' },
    { check: 'repeat.headers', level: 'MUST', source: 'docs/replays.md' },
    { check: 'repeat.once', level: 'MUST', source: 'docs/invariants.md (at most one execution)' },
    { check: 'storm.once', level: 'MUST', source: 'docs/invariants.md (at most one execution)' },
    { check: 'storm.one-answer', level: 'MUST', source: 'docs/invariants.md (one answer per key)' },
    { check: 'storm.retry-after', level: 'MUST', source: 'docs/replays.md (in flight: 409, Retry-After)' },
    { check: 'other-body.problem', level: 'MUST', source: 'docs/keys-and-fingerprints.md (fingerprint-mismatch)' },
    { check: 'other-body.once', level: 'MUST', source: 'docs/keys-and-fingerprints.md' },
    { check: 'other-route.not-mixed', level: 'MUST', source: 'docs/keys-and-fingerprints.md (the record key)' },
    { check: 'keys.missing', level: 'MUST', source: 'docs/keys-and-fingerprints.md (key-missing)' },
    { check: 'keys.empty', level: 'MUST', source: 'docs/keys-and-fingerprints.md (key-invalid)' },
    { check: 'keys.long', level: 'MUST', source: 'docs/keys-and-fingerprints.md (key-invalid)' },
    { check: 'keys.list', level: 'MUST', source: 'docs/keys-and-fingerprints.md (key-invalid)' },
    { check: 'keys.quoted', level: 'MUST', source: 'docs/keys-and-fingerprints.md (the key)' },
    { check: 'json-form.same-request', level: 'MUST', source: 'docs/keys-and-fingerprints.md (canonical JSON)' },
    { check: 'json-form.once', level: 'MUST', source: 'docs/keys-and-fingerprints.md (canonical JSON)' },
    { check: 'failing-first.module', level: 'MUST', source: 'docs/replays.md (storeIf)' },
    { check: 'large-body.answered', level: 'MUST', source: 'docs/limits.md' },
    { check: 'kill-window.once-or-none', level: 'MUST', source: 'docs/invariants.md (crashes)' },
  ],
  'ietf-07': [
    { check: 'repeat.succeeds', level: 'precondition', source: '--url, --body' },
    { check: 'keys.quoted', level: 'MUST', source: `${IETF} §2.1 Syntax (the value is a structured-field String)` },
    { check: 'repeat.same-answer', level: 'SHOULD', source: `${IETF} §2.6 Idempotency Enforcement Scenarios` },
    { check: 'repeat.once', level: 'SHOULD', source: `${IETF} §2.6 Idempotency Enforcement Scenarios` },
    { check: 'storm.once', level: 'SHOULD', source: `${IETF} §2.6 Idempotency Enforcement Scenarios` },
    { check: 'storm.one-answer', level: 'SHOULD', source: `${IETF} §2.7 Error Scenarios (409 Conflict)` },
    { check: 'other-body.422', level: 'SHOULD', source: `${IETF} §2.7 Error Scenarios (422 Unprocessable Content)` },
    { check: 'other-body.once', level: 'SHOULD', source: `${IETF} §2.4 Idempotency Fingerprint` },
    { check: 'keys.missing', level: 'SHOULD', source: `${IETF} §2.7 Error Scenarios (400 Bad Request)` },
    { check: 'failing-first.error-replayed', level: 'SHOULD', source: `${IETF} §2.6 ("success or an error")` },
    { check: 'kill-window.once-or-none', level: 'SHOULD', source: `${IETF} §1 Introduction (fault-tolerant)` },
  ],
  stripe: [
    { check: 'repeat.succeeds', level: 'precondition', source: '--url, --body' },
    { check: 'repeat.same-answer', level: 'documented', source: `${STRIPE} (the same result)` },
    { check: 'repeat.replay-marker', level: 'documented', source: `${STRIPE} (Idempotent-Replayed header)` },
    { check: 'repeat.once', level: 'documented', source: STRIPE },
    { check: 'storm.once', level: 'documented', source: STRIPE },
    { check: 'storm.one-answer', level: 'documented', source: `${STRIPE} (409 idempotency_key_in_use)` },
    { check: 'other-body.400', level: 'documented', source: `${STRIPE} (same parameters, idempotency_error)` },
    { check: 'other-body.once', level: 'documented', source: STRIPE },
    { check: 'keys.long', level: 'documented', source: `${STRIPE} (keys up to 255 characters)` },
    { check: 'json-form.same-request', level: 'documented', source: `${STRIPE} (compares parameters)` },
    { check: 'failing-first.5xx-replayed', level: 'documented', source: `${STRIPE} (including 500 errors)` },
    { check: 'kill-window.once-or-none', level: 'documented', source: `${STRIPE} (safely retry)` },
  ],
};
