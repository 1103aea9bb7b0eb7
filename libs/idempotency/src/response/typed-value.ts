import { binaryValue, isBinaryView } from './binary-values';

/**
 * A value as JSON that comes back as the types it was: JSON itself, plus `Date`, `BigInt`, `Map`, `Set`, `Buffer`,
 * typed arrays and `ArrayBuffer`, `undefined` (as a member, an array element or the whole value), `NaN`, `±Infinity`
 * and `-0`. Each of those is an object with one tag member, `$type`, and its `value`; a plain object that has a
 * `$type` member of its own is wrapped (`{ $type: 'Object', value }`), so no data is ever read as a tag. Other class
 * instances are recorded as JSON would send them (`toJSON()` when they have one, else their own enumerable members)
 * and come back as plain objects. Functions, symbols and cycles cannot be recorded: `encodeTyped` refuses them.
 */

const TAG = '$type';
const MAX_DEPTH = 256;

/** A value `encodeTyped` cannot record; `message` names where it is (`result.items[2]`). */
export class UnrecordableValueError extends TypeError {
  override name = 'UnrecordableValueError';
}

type Tagged = { [TAG]: string; value?: unknown };

/** `value` as JSON data, tagged where JSON cannot say what it was. `where` names the value in errors (`result`). */
export function encodeTyped(value: unknown, where = 'the value'): unknown {
  return encode(value, where, new Set(), 0);
}

function encode(value: unknown, path: string, ancestors: Set<object>, depth: number): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (Object.is(value, -0)) return { [TAG]: 'Number', value: '-0' };
      return Number.isFinite(value) ? value : { [TAG]: 'Number', value: String(value) };
    case 'undefined':
      return { [TAG]: 'undefined' };
    case 'bigint':
      return { [TAG]: 'BigInt', value: value.toString() };
    case 'function':
    case 'symbol':
      throw new UnrecordableValueError(`${path} is a ${typeof value}, which cannot be recorded`);
  }
  if (value === null) return null;
  const object = value as object;
  if (ancestors.has(object)) throw new UnrecordableValueError(`${path} refers to an object that contains it (a cycle)`);
  if (depth >= MAX_DEPTH) throw new UnrecordableValueError(`${path} is nested more than ${MAX_DEPTH} levels deep`);
  ancestors.add(object);
  try {
    return encodeObject(object, path, ancestors, depth + 1);
  } finally {
    ancestors.delete(object);
  }
}

function encodeObject(object: object, path: string, ancestors: Set<object>, depth: number): unknown {
  const inner = (item: unknown, at: string) => encode(item, at, ancestors, depth);
  if (object instanceof Date) {
    return { [TAG]: 'Date', value: Number.isNaN(object.getTime()) ? null : object.toISOString() };
  }
  if (Buffer.isBuffer(object)) return { [TAG]: 'Buffer', value: object.toString('base64') };
  if (ArrayBuffer.isView(object)) {
    const type = isBinaryView(object.constructor.name) ? object.constructor.name : 'Uint8Array';
    return { [TAG]: type, value: Buffer.from(object.buffer, object.byteOffset, object.byteLength).toString('base64') };
  }
  if (object instanceof ArrayBuffer) return { [TAG]: 'ArrayBuffer', value: Buffer.from(object).toString('base64') };
  if (object instanceof Map) {
    return {
      [TAG]: 'Map',
      value: [...object].map(([k, v], i) => [inner(k, `${path}.keys[${i}]`), inner(v, `${path}.get(…)`)]),
    };
  }
  if (object instanceof Set) return { [TAG]: 'Set', value: [...object].map((item, i) => inner(item, `${path}[${i}]`)) };
  if (Array.isArray(object)) return Array.from(object, (item, i) => inner(item, `${path}[${i}]`));
  const toJSON = (object as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    const json: unknown = toJSON.call(object);
    // A `toJSON` that returns the object itself (`toJSON() { return this }`): its members, as JSON.stringify writes it.
    if (json !== object) return inner(json, path);
  }
  const members: Record<string, unknown> = {};
  for (const key of Object.keys(object)) {
    if (key === 'toJSON' && typeof toJSON === 'function') continue;
    const member = inner((object as Record<string, unknown>)[key], `${path}.${key}`);
    Object.defineProperty(members, key, { value: member, enumerable: true, writable: true, configurable: true });
  }
  return TAG in members ? { [TAG]: 'Object', value: members } : members;
}

/** The value `encodeTyped` recorded, as new objects of the types it had. */
export function decodeTyped(encoded: unknown): unknown {
  if (Array.isArray(encoded)) return encoded.map(decodeTyped);
  if (encoded === null || typeof encoded !== 'object') return encoded;
  if (TAG in encoded) return decodeTagged(encoded as Tagged);
  return decodeMembers(encoded as Record<string, unknown>);
}

function decodeMembers(members: Record<string, unknown>): Record<string, unknown> {
  const decoded: Record<string, unknown> = {};
  for (const key of Object.keys(members)) {
    const value = decodeTyped(members[key]);
    Object.defineProperty(decoded, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return decoded;
}

function decodeTagged({ [TAG]: type, value }: Tagged): unknown {
  switch (type) {
    case 'undefined':
      return undefined;
    case 'Number':
      return value === '-0' ? -0 : Number(value);
    case 'BigInt':
      return BigInt(value as string);
    case 'Date':
      return new Date(value === null ? Number.NaN : (value as string));
    case 'Map':
      return new Map((value as [unknown, unknown][]).map(([k, v]) => [decodeTyped(k), decodeTyped(v)]));
    case 'Set':
      return new Set((value as unknown[]).map(decodeTyped));
    case 'Object':
      return decodeMembers(value as Record<string, unknown>);
    case 'Buffer':
      return Buffer.from(value as string, 'base64');
  }
  const binary = binaryValue(type, Buffer.from(value as string, 'base64'));
  if (binary === undefined) throw new TypeError(`a recorded value has an unknown type tag: ${type}`);
  return binary;
}
