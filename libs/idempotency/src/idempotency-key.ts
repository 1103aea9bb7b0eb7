import { MAX_KEY_LENGTH } from './idempotency.constants';

export type ParsedKey =
  | { outcome: 'present'; key: string }
  | { outcome: 'missing' }
  | { outcome: 'invalid'; reason: string };

const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Reads an `Idempotency-Key` header value. The IETF draft writes the key as a structured-field string
 * (`"abc"`); plain `abc` is accepted too. A repeated header reaches us joined with commas: refused,
 * since there is no telling which key the client meant.
 */
export function parseKeyHeader(value: string | string[] | undefined): ParsedKey {
  if (value === undefined) return { outcome: 'missing' };
  if (Array.isArray(value)) return invalid('the header was sent more than once');
  const trimmed = value.trim();
  const quoted = /^"(.*)"$/s.exec(trimmed);
  const key = quoted ? quoted[1] : trimmed;
  if (key.includes(',') || (quoted && key.includes('"'))) return invalid('the header holds a list; send exactly one key');
  return validateKey(key);
}

/** Validates a key from any source: non-empty, at most 255 characters, no control characters. */
export function validateKey(key: unknown): ParsedKey {
  if (key === undefined || key === null) return { outcome: 'missing' };
  if (typeof key === 'number' && Number.isFinite(key)) key = String(key);
  if (typeof key !== 'string') return invalid('the key must be a string');
  if (key.length === 0) return invalid('the key is empty');
  if (key.length > MAX_KEY_LENGTH) return invalid(`the key is longer than ${MAX_KEY_LENGTH} characters`);
  if (CONTROL_CHARACTERS.test(key)) return invalid('the key contains control characters');
  return { outcome: 'present', key };
}

function invalid(reason: string): ParsedKey {
  return { outcome: 'invalid', reason };
}
