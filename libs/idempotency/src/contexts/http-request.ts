import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { fingerprintRequest } from '../keys/fingerprint';
import { IdempotencyBodyUnreadableError } from '../errors/idempotency.errors';

/**
 * SHA-256 of an HTTP request as the handler can read it: method, route, path parameters, query, the parsed body and
 * every uploaded file (field, original name, MIME type, size and a SHA-256 of its bytes). A body that nothing has
 * parsed yet, or a file whose bytes were not kept, is refused (`IdempotencyBodyUnreadableError`): two requests that
 * differ only there could not be told apart. A promise only when there are uploaded files (their bytes may be on disk).
 * With `chosen` (the digest of the route's `fingerprint` function), that digest stands for parameters, query and body.
 */
export function requestFingerprint(
  request: any,
  method: string,
  route: string,
  chosen?: string,
): string | Promise<string> {
  const where = `${method} ${route}`;
  const raw = request.raw ?? request; // Fastify's request wraps Node's
  if (carriesBody(raw) && !raw.readableEnded) throw unparsedBody(where, raw.headers['content-type']);
  const body = withFileParts(request.body, where);
  // On Fastify, @fastify/multipart decorates requests with file() and files() methods: those are not uploads.
  const file = uploaded(request.file) as MulterFile | undefined;
  const files = uploaded(request.files) as MulterFile[] | Record<string, MulterFile[]> | undefined;
  // The route's own fingerprint (`chosen`) stands for what the handler reads of the request; files stay in.
  const input =
    chosen === undefined
      ? { method, route, params: request.params, query: request.query, body }
      : { method, route, params: null, query: null, body: { $fingerprint: chosen } };
  if (file === undefined && files === undefined) return fingerprintRequest(input);
  // Files on disk are read to be hashed: only then is the fingerprint a promise.
  return multerFiles(file, files, where).then((digests) => fingerprintRequest({ ...input, files: digests }));
}

function uploaded(value: unknown): object | undefined {
  return typeof value === 'object' && value !== null ? value : undefined;
}

/** A `Content-Length` above 0, or a body of unknown length (chunked). */
function carriesBody(raw: { headers: Record<string, string | string[] | undefined> }): boolean {
  return Number(raw.headers['content-length'] ?? 0) > 0 || raw.headers['transfer-encoding'] !== undefined;
}

function unparsedBody(where: string, contentType: unknown): IdempotencyBodyUnreadableError {
  return new IdempotencyBodyUnreadableError(
    `${where}: the request carries a body (${String(contentType ?? 'no content type')}) that nothing had parsed when ` +
      'its fingerprint was taken, so requests that differ only in it could not be told apart; the handler did not run. ' +
      "Enable a parser for this content type (on Express app.useBodyParser('text') or app.useBodyParser('raw'); on " +
      'Fastify a content-type parser, or @fastify/multipart with attachFieldsToBody), or bind the upload interceptor ' +
      'before @Idempotent() (write @Idempotent() above @UseInterceptors(FileInterceptor(…))).',
  );
}

/** The digest of one uploaded file: what the fingerprint holds of it. */
interface FileDigest {
  $file: { field: string; name: string; type: string; size: number; sha256: string };
}

/** A file multer (Express's `FileInterceptor` family) put on the request: in memory (`buffer`) or on disk (`path`). */
interface MulterFile {
  fieldname: string;
  originalname: string;
  mimetype: string;
  size: number;
  buffer?: Buffer;
  path?: string;
}

/** `req.file` and `req.files` (an array, or arrays by field name) as digests. */
async function multerFiles(
  file: MulterFile | undefined,
  files: MulterFile[] | Record<string, MulterFile[]> | undefined,
  where: string,
): Promise<unknown> {
  const digest = (one: MulterFile) => multerDigest(one, where);
  const all = async (list: MulterFile[]) => Promise.all(list.map(digest));
  let digestedFiles: unknown;
  if (Array.isArray(files)) digestedFiles = await all(files);
  else if (files) {
    const entries = await Promise.all(
      Object.entries(files).map(async ([field, list]) => [field, await all(list)] as const),
    );
    digestedFiles = Object.fromEntries(entries);
  }
  return { file: file && (await digest(file)), files: digestedFiles };
}

async function multerDigest(file: MulterFile, where: string): Promise<FileDigest> {
  let hash: string;
  if (file.buffer) hash = sha256Bytes(file.buffer);
  else if (file.path) hash = await sha256File(file.path);
  else
    throw fileNotKept(
      where,
      file.fieldname,
      'its storage engine kept neither a buffer (memory storage) nor a path (disk storage)',
    );
  return {
    $file: { field: file.fieldname, name: file.originalname, type: file.mimetype, size: file.size, sha256: hash },
  };
}

/**
 * A body from `@fastify/multipart` with `attachFieldsToBody: true` holds parts, not values: fields become their value,
 * files their digest (their bytes are in `_buf`).
 */
function withFileParts(body: unknown, where: string): unknown {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || Buffer.isBuffer(body)) return body;
  if (!hasParts(body)) return body;
  const read = (value: unknown) => (isPart(value) ? partValue(value, where) : value);
  const entries = Object.entries(body).map(([name, value]) => [
    name,
    Array.isArray(value) ? value.map(read) : read(value),
  ]);
  return Object.fromEntries(entries);
}

/** Whether a parsed body holds multipart parts (a value, or a list of values, that is one). */
function hasParts(body: object): boolean {
  for (const name in body) {
    if (!Object.hasOwn(body, name)) continue;
    const value = (body as Record<string, unknown>)[name];
    if (isPart(value) || (Array.isArray(value) && value.some(isPart))) return true;
  }
  return false;
}

interface MultipartPart {
  type: 'file' | 'field';
  fieldname: string;
  filename?: string;
  mimetype: string;
  value?: unknown;
  _buf?: Buffer | null;
}

function isPart(value: unknown): value is MultipartPart {
  const part = value as MultipartPart | null;
  return (
    typeof part === 'object' &&
    part !== null &&
    (part.type === 'file' || part.type === 'field') &&
    typeof part.fieldname === 'string' &&
    'fields' in part
  );
}

function partValue(part: MultipartPart, where: string): unknown {
  if (part.type === 'field') return part.value;
  if (!Buffer.isBuffer(part._buf))
    throw fileNotKept(where, part.fieldname, 'its bytes were not kept (an onFile handler consumed the stream)');
  const bytes = part._buf;
  return {
    $file: {
      field: part.fieldname,
      name: part.filename ?? '',
      type: part.mimetype,
      size: bytes.length,
      sha256: sha256Bytes(bytes),
    },
  };
}

function fileNotKept(where: string, field: string, why: string): IdempotencyBodyUnreadableError {
  return new IdempotencyBodyUnreadableError(
    `${where}: the uploaded file in field "${field}" cannot be fingerprinted: ${why}. Keep uploads in memory or on disk ` +
      'for @Idempotent() routes, so that a retry with another file is told apart.',
  );
}

function sha256Bytes(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
