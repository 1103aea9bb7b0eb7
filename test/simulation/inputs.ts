/**
 * The oracles of the input simulation (./input-simulation.e2e-spec.ts), written apart from the library's code so
 * that a change there cannot change what they say.
 */

/** A value JSON cannot tell apart from another one: it would write it as something else, or leave it out. */
export class NotJson extends Error {}

/**
 * What a value means as JSON, in canonical form (keys sorted): a valid Date as its ISO text, a `toJSON` as what it
 * returns, undefined members left out. Throws `NotJson` for what JSON writes as another value or cannot write: NaN and
 * ±Infinity, an invalid Date, a Set, Map, RegExp, Error or promise, a function, a symbol, a BigInt.
 */
export function jsonMeaning(value: unknown): string {
  return JSON.stringify(meaning(value, true));
}

function meaning(value: unknown, top: boolean): unknown {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new NotJson(`${value}`);
    return value;
  }
  if (value === undefined) {
    if (top) return null;
    throw new NotJson('undefined in an array');
  }
  if (typeof value !== 'object') throw new NotJson(typeof value);
  for (const opaque of [Set, Map, WeakMap, WeakSet, RegExp, Error, Promise]) {
    if (value instanceof opaque) throw new NotJson(opaque.name);
  }
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new NotJson('an invalid Date');
    return value.toISOString();
  }
  if (Buffer.isBuffer(value)) return { $buffer: value.toString('base64') };
  const withToJson = value as { toJSON?: unknown };
  if (typeof withToJson.toJSON === 'function') return meaning(withToJson.toJSON(), top);
  if (Array.isArray(value)) return value.map((item) => (item === undefined ? null : meaning(item, false)));
  if (ArrayBuffer.isView(value)) throw new NotJson('a typed array');
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const member = (value as Record<string, unknown>)[key];
    if (member === undefined) continue;
    Object.defineProperty(sorted, key, { value: meaning(member, false), enumerable: true });
  }
  return sorted;
}

/**
 * A rejected promise that knows whether anyone handled it (`then` with a rejection handler, or `catch`): what Node
 * would report as an unhandled rejection, seen inside Jest (which keeps such events to itself).
 */
export class TrackedRejection extends Promise<never> {
  handled = false;

  static of(reason: unknown): TrackedRejection {
    const promise = new TrackedRejection((_resolve, reject) => reject(reason));
    return promise;
  }

  override then<A = never, B = never>(
    onFulfilled?: ((value: never) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    if (onRejected) this.handled = true;
    return super.then(onFulfilled, onRejected);
  }
}

/** The input simulations' budget per property (`SIMULATION_INPUT_RUNS`, default 60) and seed (`SIMULATION_SEED`). */
export const INPUT_RUNS = Number(process.env.SIMULATION_INPUT_RUNS ?? 60);
export const INPUT_SEED = process.env.SIMULATION_SEED === undefined ? undefined : Number(process.env.SIMULATION_SEED);
