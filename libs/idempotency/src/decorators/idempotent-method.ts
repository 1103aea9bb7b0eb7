import {
  GRAPHQL_RESOLVER_TYPE_METADATA,
  MESSAGE_PATTERN_METADATA,
  METHOD_METADATA,
  WEBSOCKET_MESSAGE_METADATA,
} from '../nest-internals';

/** Runs the calls of `@Idempotent()` provider methods under the protocol, for one application (`IdempotentMethodCalls`). */
export interface MethodCallRunner {
  run(instance: object, method: Function, args: unknown[]): Promise<unknown>;
  /** Whether the instance is one of this application's providers: then it is marked with this runner and true. */
  adopt(instance: object): boolean;
}

/** The runners of the applications alive in this process (usually one). */
const runners = new Set<MethodCallRunner>();

/** An application's runner, from its creation (before any lifecycle hook: a queue worker may call at once) to its close. */
export function registerRunner(runner: MethodCallRunner): () => void {
  runners.add(runner);
  return () => runners.delete(runner);
}

/**
 * What runs each protected instance's calls, once its application has adopted it (at its first call), so two
 * applications in one process (tests, a worker beside an API) never share one. Kept beside the instance, not on it: a
 * frozen instance (`Object.freeze(this)`) takes no property.
 */
const adopted = new WeakMap<object, MethodCallRunner>();

function runnerOf(instance: unknown): MethodCallRunner | undefined {
  if (!instance || typeof instance !== 'object') return undefined;
  let runner = adopted.get(instance);
  if (!runner) {
    runner = [...runners].find((each) => each.adopt(instance));
    if (runner) adopted.set(instance, runner);
  }
  return runner;
}

/** The method as written, behind the function `@Idempotent()` put in its place. */
export const ORIGINAL_METHOD = Symbol.for('nestjs-dynamodb-idempotency.originalMethod');

/**
 * `@Idempotent()` on a method puts a function of its own in the method's place when the class is defined, so whatever
 * calls the method later (an event emitter, a scheduler, a queue worker, the application itself) calls it protected,
 * whatever order the decorators are written in: metadata other decorators put on the method (`@OnEvent`, `@Cron`) is
 * copied to it, and decorators written above it put theirs on it. A method Nest calls through its own pipeline (a
 * route, a message handler, a GraphQL resolver) is called as written: the interceptor protects it.
 */
export function protectMethodCalls(target: object, name: string | symbol, descriptor: PropertyDescriptor): void {
  const original: unknown = descriptor.value;
  if (typeof original !== 'function' || Reflect.hasOwnMetadata(ORIGINAL_METHOD, original)) return;
  if (typeof target === 'function') {
    throw new TypeError(
      `@Idempotent() on the static method ${target.name}.${String(name)}: a static method belongs to no instance ` +
        'Nest created, so nothing could run its calls under the module. Make it an instance method of a provider, or ' +
        'call IdempotencyService.execute() inside it.',
    );
  }
  let throughPipeline: boolean | undefined;
  const protectedMethod = function (this: unknown, ...args: unknown[]) {
    throughPipeline ??= PIPELINE_METADATA.some((key) => Reflect.hasMetadata(key, protectedMethod));
    if (throughPipeline) return original.apply(this, args);
    // Every failure of a protected call is a rejected promise, as the protocol's own are.
    const runner = runnerOf(this);
    if (!runner) return Promise.reject(new Error(notSetUp(target, name)));
    return runner.run(this as object, protectedMethod, args);
  };
  for (const key of Reflect.getOwnMetadataKeys(original)) {
    Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), protectedMethod);
  }
  Reflect.defineMetadata(ORIGINAL_METHOD, original, protectedMethod);
  Object.defineProperty(protectedMethod, 'name', { value: original.name });
  Object.defineProperty(protectedMethod, 'length', { value: original.length });
  descriptor.value = protectedMethod;
}

/**
 * Whether an instance's class has an `@Idempotent()` method that is called as written, not through Nest's pipeline
 * (a provider method): its calls are then tracked, so a re-entrant call is found (`IdempotencyReentrantCallError`).
 */
export function hasProtectedMethods(instance: unknown): boolean {
  if (!instance || typeof instance !== 'object') return false;
  for (let prototype = Object.getPrototypeOf(instance); prototype && prototype !== Object.prototype;) {
    for (const name of Object.getOwnPropertyNames(prototype)) {
      const method: unknown = Object.getOwnPropertyDescriptor(prototype, name)?.value;
      const protectedMethod = typeof method === 'function' && Reflect.hasOwnMetadata(ORIGINAL_METHOD, method);
      if (protectedMethod && !PIPELINE_METADATA.some((key) => Reflect.hasMetadata(key, method))) return true;
    }
    prototype = Object.getPrototypeOf(prototype);
  }
  return false;
}

/** The metadata of the handlers Nest calls through its pipeline (and `IdempotencyInterceptor`). */
const PIPELINE_METADATA = [
  METHOD_METADATA,
  MESSAGE_PATTERN_METADATA,
  GRAPHQL_RESOLVER_TYPE_METADATA,
  WEBSOCKET_MESSAGE_METADATA,
];

function notSetUp(target: object, name: string | symbol): string {
  return (
    `${target.constructor.name}.${String(name)} is @Idempotent(), but this instance is not a provider of an ` +
    'application that imports IdempotencyModule, so the call would run unprotected: call it on the instance Nest ' +
    'created. It was not run.'
  );
}
