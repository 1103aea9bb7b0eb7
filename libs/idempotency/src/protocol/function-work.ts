import { IdempotencyKeyMissingError } from '../errors/idempotency.errors';
import { fingerprintValue } from '../keys/fingerprint';
import { validateKey } from '../keys/idempotency-key';
import { checkOperationFits, recordKey, scopePartition, scopeText } from '../keys/record-key';
import { validateCallSettings } from '../options/option-checks';
import { ResolvedIdempotencyOptions } from '../options/resolved-options';
import { replayedBody, storedTypedResult } from '../response/stored-response.codec';
import { RecordLocation } from '../repository/idempotency.repository';
import { IdempotencyContext } from './idempotency-context';
import { CallSettings, ExecuteOptions, ProtectedCall, ProtectedWork } from './protected-call';

/** Fills a call's settings from the module's options (`IdempotencyService.call`). */
export type CallFiller = (
  recordKey: string,
  fingerprint: string,
  settings: CallSettings & { partition?: string },
) => ProtectedCall;

/** The module options a call's checks read. */
type ModuleSettings = Pick<ResolvedIdempotencyOptions, 'clockSkewSeconds' | 'layout'>;

/**
 * Checks `execute()`'s options before anything is claimed: the operation (non-empty, and short enough for the table's
 * key once written as `fn <operation>`) and the call settings, each a `TypeError` naming it.
 */
export function checkExecuteOptions(options: Omit<ExecuteOptions, 'key'>, module: ModuleSettings): void {
  const { operation } = options ?? {};
  if (typeof operation !== 'string' || operation.length === 0) {
    throw new TypeError("IdempotencyService.execute needs an operation name (e.g. { operation: 'charge-card', key }).");
  }
  const where = `IdempotencyService.execute(${operation.slice(0, 40)})`;
  checkOperationFits(`fn ${operation}`, 'operation', where, module.layout);
  validateCallSettings(options, where, module.clockSkewSeconds);
}

/** Where `execute()` keeps the record of a call: `fn <operation>`, the scope and the key (validated), its partition. */
export function functionRecord(
  options: Pick<ExecuteOptions, 'operation' | 'key' | 'scope' | 'partitionKeyValue'>,
  module: ModuleSettings,
  caller: string,
): RecordLocation {
  const key = validateKey(options.key);
  if (key === undefined) throw new IdempotencyKeyMissingError(`${caller} needs a key.`);
  const { keyPrefix, sortKey } = module.layout;
  const scope = scopeText(options.scope);
  const partition = sortKey ? (options.partitionKeyValue ?? scopePartition(keyPrefix, scope)) : undefined;
  return { key: recordKey(`fn ${options.operation}`, scope, key), partition };
}

/**
 * `IdempotencyService.execute()`'s work: a plain function, keyed by `fn <operation>`, the caller's key and scope, its
 * result stored as the JSON it would be sent as. The options are checked before anything is claimed.
 */
export function functionWork<T>(
  options: ExecuteOptions,
  fn: (context: IdempotencyContext) => T | Promise<T>,
  module: ModuleSettings,
  fill: CallFiller,
): ProtectedWork<T> {
  checkExecuteOptions(options, module);
  const { operation } = options;
  return {
    describe: () => {
      const { key, partition } = functionRecord(options, module, 'IdempotencyService.execute');
      return fill(key, fingerprintValue(options.fingerprint), { ...options, partition });
    },
    // An owned run always hands its function a context bound to the claim.
    execute: async (context) => fn(context!),
    capture: storedTypedResult,
    replay: (stored) => replayedBody(stored) as T,
    transport: options.transport ?? 'function',
    origin: () => ({ transport: options.transport ?? 'function', operation: `fn ${operation}` }),
  };
}
