/**
 * Where this process's protected calls answer `deriveKey(name)` for the client: a function on `globalThis` under a
 * registered symbol, set by the module (protocol/idempotency-context.ts), so that the client imports nothing of Nest.
 */
export const DERIVE_KEY_HOOK = Symbol.for('nestjs-dynamodb-idempotency.deriveKey');

type DeriveKey = (name: string) => string | undefined;

/** The key `name` derives in the protected call this runs in; throws when there is none. */
export function derivedKey(name: string): string {
  if (typeof name !== 'string' || name.length === 0)
    throw new TypeError('IdempotentClient: name must be a non-empty string');
  const derive = (globalThis as Record<symbol, DeriveKey | undefined>)[DERIVE_KEY_HOOK];
  const key = derive?.(name);
  if (key === undefined) {
    throw new Error(
      `IdempotentClient: { name: '${name}' } takes its key from the protected call it runs in (IdempotencyContext.` +
        'deriveKey), and none runs here. Pass { key } outside protected calls. Inside an @Idempotent() handler or ' +
        'IdempotencyService.execute(), calls are tracked unless the module has unkeyedCalls: "off" and nothing ' +
        'injects IdempotencyContext.',
    );
  }
  return key;
}

/** Where a running step (`IdempotencyContext.step`) answers its key for the client; set by the module (step-journal.ts). */
export const STEP_KEY_HOOK = Symbol.for('nestjs-dynamodb-idempotency.stepKey');

/** The key of the step this runs in, if any: a call inside a step without a key or name takes it. */
export function stepKey(): string | undefined {
  return (globalThis as Record<symbol, (() => string | undefined) | undefined>)[STEP_KEY_HOOK]?.();
}
