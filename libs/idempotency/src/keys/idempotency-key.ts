import { MAX_KEY_LENGTH } from '../idempotency.constants';
import { IdempotencyKeyInvalidError } from '../errors/idempotency.errors';

const CONTROL_CHARACTERS = /\p{Cc}/u;
/** A key sent bare in printable ASCII, without quotes or commas, as nearly all are: nothing to decode, trim or refuse. */
const BARE_KEY = new RegExp(`^[!#-+\\--~]{1,${MAX_KEY_LENGTH}}$`);

/**
 * Reads an `Idempotency-Key` header value; undefined when absent. The IETF draft writes the key as a
 * structured-field string (`"abc"`); plain `abc` is accepted too. A repeated header reaches us joined with
 * commas: refused, since there is no telling which key the client meant. Node hands header values over as Latin-1
 * text; the bytes are read as UTF-8 when they are valid UTF-8 (a key `ключ-1` is those six characters), else as
 * Latin-1.
 */
export function parseKeyHeader(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw new IdempotencyKeyInvalidError('the header was sent more than once');
  if (BARE_KEY.test(value)) return value;
  const trimmed = asUtf8(value).replace(/^[ \t]+|[ \t]+$/g, '');
  const quoted = /^"(.*)"$/s.exec(trimmed);
  const key = quoted ? quoted[1] : trimmed;
  if (key.includes(',') || (quoted && key.includes('"'))) {
    throw new IdempotencyKeyInvalidError('the header holds a list; send exactly one key');
  }
  return validateKey(key);
}

/** Header text as UTF-8 when its bytes are valid UTF-8, else unchanged (Latin-1). */
function asUtf8(latin1: string): string {
  // eslint-disable-next-line no-control-regex
  if (!/[^\u0000-\u007f]/.test(latin1)) return latin1;
  const bytes = Buffer.from(latin1, 'latin1');
  const text = bytes.toString('utf8');
  return Buffer.from(text, 'utf8').equals(bytes) ? text : latin1;
}

/**
 * Validates a key from any source: non-empty, at most 255 characters (code points), no control characters
 * (C0, DEL, C1). Numbers become their decimal text; null and undefined mean "no key".
 */
export function validateKey(key: unknown): string | undefined {
  if (key === undefined || key === null) return undefined;
  if (typeof key === 'number' && Number.isFinite(key)) key = String(key);
  if (typeof key !== 'string') throw new IdempotencyKeyInvalidError('the key must be a string');
  if (key.length === 0) throw new IdempotencyKeyInvalidError('the key is empty');
  if (key.length > MAX_KEY_LENGTH && [...key].length > MAX_KEY_LENGTH)
    throw new IdempotencyKeyInvalidError(`the key is longer than ${MAX_KEY_LENGTH} characters`);
  if (CONTROL_CHARACTERS.test(key)) throw new IdempotencyKeyInvalidError('the key contains control characters');
  return key;
}
