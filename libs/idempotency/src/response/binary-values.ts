/** The typed views a binary body or a recorded value may be, by constructor name (a `Buffer` is handled apart). */
const VIEWS: Record<string, new (buffer: ArrayBuffer) => ArrayBufferView> = {
  Uint8Array,
  Uint8ClampedArray,
  Int8Array,
  Uint16Array,
  Int16Array,
  Uint32Array,
  Int32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  DataView,
};

/** Whether `name` is a view type `binaryValue` can make again. */
export function isBinaryView(name: string): boolean {
  return Object.hasOwn(VIEWS, name);
}

/**
 * `bytes` again as what they were stored from: a fresh `ArrayBuffer` (`ArrayBuffer`), or a view of `type` over one (a
 * copy: nothing done to it reaches the next replay); undefined for a type it does not know.
 */
export function binaryValue(type: string, bytes: Buffer): ArrayBuffer | ArrayBufferView | undefined {
  const copy = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  if (type === 'ArrayBuffer') return copy;
  return isBinaryView(type) ? new VIEWS[type](copy) : undefined;
}
