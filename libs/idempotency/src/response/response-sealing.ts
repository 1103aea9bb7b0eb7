import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { COMPRESS_RESPONSE_ABOVE_BYTES } from '../idempotency.constants';
import { StoredResponse } from '../repository/idempotency.record';

/** `encryption` of the module options: stored responses sealed with AES-256-GCM. */
export interface EncryptionOptions {
  /**
   * 32-byte keys (a `Buffer`/`Uint8Array`, or base64 text such as `openssl rand -base64 32` prints). The first seals
   * every new response; every key opens. Rotate by putting a new key first and keeping the old ones until the records
   * they sealed have expired (`ttlSeconds`).
   */
  keys: Array<string | Uint8Array>;
  /**
   * Read records stored before encryption was turned on as they are (a rollout). Default false: an unsealed record
   * is unreadable, like a tampered one.
   */
  allowPlaintext?: boolean;
}

const VERSION = 1;
const GZIPPED = 1;
const KEY_ID_BYTES = 8;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 2 + KEY_ID_BYTES;

/** A record whose response cannot be opened: its key was removed, it was altered, or it was copied from another key. */
export class UnreadableRecordError extends Error {}

/**
 * Seals stored responses (status aside: headers, body, everything else) for the table, and opens them again. The
 * record's partition key is the additional authenticated data, so a sealed response copied under another key fails to
 * open. Envelope (base64 in `sealed`): version, flags (gzipped), key id (SHA-256 of the key, 8 bytes), IV, GCM tag,
 * ciphertext.
 */
export class ResponseSealer {
  private readonly keys: { id: Buffer; key: Buffer }[];

  constructor(private readonly options: EncryptionOptions) {
    this.keys = options.keys.map((key) => {
      const bytes = Buffer.from(keyBytes(key)!);
      return { id: createHash('sha256').update(bytes).digest().subarray(0, KEY_ID_BYTES), key: bytes };
    });
  }

  /** Checks the options at startup: at least one key, each of 32 bytes. */
  static from(options: EncryptionOptions | undefined, where: string): ResponseSealer | undefined {
    if (options === undefined) return undefined;
    const keys: unknown = options?.keys;
    if (!Array.isArray(keys) || keys.length === 0)
      throw new Error(`${where}: encryption.keys must list at least one 32-byte key`);
    keys.forEach((key, index) => {
      if (keyBytes(key)?.byteLength !== 32) {
        throw new Error(
          `${where}: encryption.keys[${index}] must be 32 bytes (a Buffer, or base64 text of 32 bytes: openssl rand -base64 32)`,
        );
      }
    });
    return new ResponseSealer(options);
  }

  seal(recordKey: string, response: StoredResponse): StoredResponse {
    const { statusCode, ...secret } = response;
    if (response.bodyOmitted) {
      return { statusCode, headers: {}, bodyOmitted: true, omittedBecause: response.omittedBecause }; // and no headers
    }
    let plaintext = Buffer.from(JSON.stringify(secret));
    const flags = plaintext.byteLength > COMPRESS_RESPONSE_ABOVE_BYTES ? GZIPPED : 0;
    if (flags & GZIPPED) plaintext = gzipSync(plaintext);
    const { id, key } = this.keys[0];
    const header = Buffer.concat([Buffer.from([VERSION, flags]), id]);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(additionalData(header, recordKey));
    const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    const sealed = Buffer.concat([header, iv, cipher.getAuthTag(), ciphertext]).toString('base64');
    return { statusCode, headers: {}, sealed };
  }

  /** The response as it was sealed; throws `UnreadableRecordError` when it cannot be opened. */
  open(recordKey: string, response: StoredResponse): StoredResponse {
    if (response.bodyOmitted) return response;
    if (response.sealed === undefined) {
      if (this.options.allowPlaintext) return response;
      throw new UnreadableRecordError('the record is not sealed, and encryption.allowPlaintext is off');
    }
    const envelope = Buffer.from(response.sealed, 'base64');
    if (envelope.byteLength < HEADER_BYTES + IV_BYTES + TAG_BYTES || envelope[0] !== VERSION) {
      throw new UnreadableRecordError('the sealed response is not in a known format');
    }
    const header = envelope.subarray(0, HEADER_BYTES);
    const id = header.subarray(2);
    const key = this.keys.find((candidate) => candidate.id.equals(id))?.key;
    if (!key)
      throw new UnreadableRecordError(
        `it was sealed with a key that is not in encryption.keys (key id ${id.toString('hex')})`,
      );
    const iv = envelope.subarray(HEADER_BYTES, HEADER_BYTES + IV_BYTES);
    const tag = envelope.subarray(HEADER_BYTES + IV_BYTES, HEADER_BYTES + IV_BYTES + TAG_BYTES);
    let plaintext: Buffer;
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, iv);
      decipher.setAAD(additionalData(header, recordKey));
      decipher.setAuthTag(tag);
      plaintext = Buffer.concat([
        decipher.update(envelope.subarray(HEADER_BYTES + IV_BYTES + TAG_BYTES)),
        decipher.final(),
      ]);
    } catch {
      throw new UnreadableRecordError('it does not authenticate: altered, or sealed for another record');
    }
    if (header[1] & GZIPPED) plaintext = gunzipSync(plaintext);
    return {
      statusCode: response.statusCode,
      ...(JSON.parse(plaintext.toString('utf8')) as Omit<StoredResponse, 'statusCode'>),
    };
  }
}

/**
 * What a step's sealed result is bound to, in place of the record key: its record and its name (one step's result
 * cannot be copied in place of another's).
 */
export function stepSealKey(recordKey: string, name: string): string {
  return `${recordKey}\0step\0${name}`;
}

/** A key as given (base64 text or bytes); undefined for anything else. */
function keyBytes(key: unknown): Uint8Array | undefined {
  if (typeof key === 'string') return Buffer.from(key, 'base64');
  return key instanceof Uint8Array ? key : undefined;
}

/** What the GCM tag authenticates besides the ciphertext: the envelope's header and the record's partition key. */
function additionalData(header: Buffer, recordKey: string): Buffer {
  return Buffer.concat([header, Buffer.from(recordKey)]);
}
