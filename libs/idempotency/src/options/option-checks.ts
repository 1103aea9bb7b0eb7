/** The checks every option goes through when the application starts, each error naming the option and where it is set. */

/**
 * Headers a replay must never carry: credentials and challenges that belong to one response (a session cookie handed
 * to whoever replays the key), and hop-by-hop headers that describe one connection.
 */
const UNREPLAYABLE_HEADERS = new Set([
  'set-cookie',
  'authorization',
  'proxy-authenticate',
  'www-authenticate',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'te',
  'trailer',
]);

export function replayableHeaders(names: unknown, where: string): string[] {
  if (!Array.isArray(names) || names.some((name) => typeof name !== 'string')) {
    throw new TypeError(
      `${where}: idempotency option replayHeaders must be a list of header names, got ${JSON.stringify(names)}`,
    );
  }
  const lower = names.map((name: string) => name.toLowerCase());
  const refused = lower.find((name) => UNREPLAYABLE_HEADERS.has(name));
  if (refused) {
    throw new TypeError(
      `${where}: replayHeaders may not include ${refused}: it belongs to one response or one connection, and a replay would ` +
        'hand it to whoever sends the key again. Remove it from replayHeaders.',
    );
  }
  return lower;
}

/** The options a route (or a call) may override that are whole seconds. */
export type SecondsOption = 'ttlSeconds' | 'pendingTtlSeconds' | 'maxLeaseSeconds' | 'retryAfterSeconds';
const SECONDS_OPTIONS: SecondsOption[] = ['ttlSeconds', 'pendingTtlSeconds', 'maxLeaseSeconds', 'retryAfterSeconds'];

/** The default skew: 2 s, but never more than a quarter of the lease, so that short leases keep working. */
const DEFAULT_CLOCK_SKEW_SECONDS = 2;

/** The skew a call with this lease runs with: the explicit `clockSkewSeconds`, else the default for its lease. */
export function clockSkewFor(leaseSeconds: number, explicit: number | undefined): number {
  return explicit ?? Math.min(DEFAULT_CLOCK_SKEW_SECONDS, leaseSeconds / 4);
}

export function explicitClockSkew(value: unknown, where: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new TypeError(
      `${where}: idempotency option clockSkewSeconds must be a number of seconds ≥ 0, got ${String(value)}`,
    );
  }
  return value;
}

/**
 * Checks a route's (or a call's) overrides; `where` names the route in the error. `clockSkewSeconds` is the module's
 * explicit skew, checked against the lease the overrides give.
 */
export function validateCallSettings(
  settings: Partial<Record<SecondsOption, unknown>> & {
    waitMs?: unknown;
    storeIf?: unknown;
    keyFrom?: unknown;
    name?: unknown;
    partitionKeyValue?: unknown;
    mode?: unknown;
    mcp?: unknown;
    maxCrashedOwners?: unknown;
    version?: unknown;
    onVersionChange?: unknown;
  },
  where: string,
  clockSkewSeconds?: number,
): void {
  for (const name of SECONDS_OPTIONS) {
    if (settings[name] !== undefined) positiveSeconds(name, settings[name], where);
  }
  const lease = settings.pendingTtlSeconds as number | undefined;
  if (clockSkewSeconds !== undefined && lease !== undefined && clockSkewSeconds >= lease / 3) {
    throw new TypeError(
      `${where}: clockSkewSeconds (${clockSkewSeconds}) must be less than a third of pendingTtlSeconds (${lease}): a live ` +
        'owner renews its lease every third of it, so a larger skew would let another process take over a lease that is ' +
        'still being renewed. Lower clockSkewSeconds or raise pendingTtlSeconds.',
    );
  }
  const { waitMs, storeIf, keyFrom, name, partitionKeyValue, mode } = settings;
  if (mode !== undefined && mode !== 'lease' && mode !== 'optimistic') {
    throw new TypeError(
      `${where}: idempotency option mode must be 'lease' or 'optimistic', got ${JSON.stringify(mode)}`,
    );
  }
  if (mode === 'optimistic' && waitMs) {
    throw new TypeError(
      `${where}: idempotency option waitMs has no effect with mode 'optimistic' (a duplicate never waits: it runs, ` +
        'and gets the first stored outcome). Remove waitMs, or use the lease mode.',
    );
  }
  if (name !== undefined && (typeof name !== 'string' || name.length === 0 || name.includes('#'))) {
    throw new TypeError(
      `${where}: idempotency option name must be a non-empty string without '#', got ${JSON.stringify(name)}`,
    );
  }
  partitionKeyValueOption(partitionKeyValue, where);
  const arg = (keyFrom as { arg?: unknown } | undefined)?.arg;
  if (keyFrom !== undefined && (typeof arg !== 'string' || arg === '')) {
    throw new TypeError(
      `${where}: idempotency option keyFrom must be { arg: 'path.to.argument' }, got ${JSON.stringify(keyFrom)}`,
    );
  }
  mcpOption(settings.mcp, where);
  if (settings.maxCrashedOwners !== undefined) crashedOwners(settings.maxCrashedOwners, where);
  versionOptions(settings.version, settings.onVersionChange, where);
  if (storeIf !== undefined && typeof storeIf !== 'function') {
    throw new TypeError(
      `${where}: idempotency option storeIf must be a function (status, error?) => boolean, got ${String(storeIf)}`,
    );
  }
  if (waitMs !== undefined && !(typeof waitMs === 'number' && Number.isFinite(waitMs) && waitMs >= 0)) {
    throw new TypeError(
      `${where}: idempotency option waitMs must be a number of milliseconds ≥ 0, got ${String(waitMs)}`,
    );
  }
}

/** `version`: 1 to 64 characters; `onVersionChange`: one of three, and only with a version. */
function versionOptions(version: unknown, change: unknown, where: string): void {
  if (version !== undefined && !(typeof version === 'string' && version.length > 0 && version.length <= 64)) {
    throw new TypeError(
      `${where}: idempotency option version must be a string of 1 to 64 characters, got ${String(version)}`,
    );
  }
  if (change === undefined) return;
  if (change !== 'refuse' && change !== 'resume' && change !== 'restart') {
    throw new TypeError(
      `${where}: idempotency option onVersionChange must be 'refuse', 'resume' or 'restart', got ${JSON.stringify(change)}`,
    );
  }
  if (version === undefined) {
    throw new TypeError(`${where}: idempotency option onVersionChange needs a version (there is nothing to compare).`);
  }
}

const MCP_KEY_SOURCES = ['argument', 'meta', 'header'];

function mcpOption(mcp: unknown, where: string): void {
  const sources = (mcp as { keySources?: unknown } | undefined)?.keySources;
  if (sources === undefined) return;
  if (
    !Array.isArray(sources) ||
    sources.length === 0 ||
    sources.some((source) => !MCP_KEY_SOURCES.includes(source as string))
  ) {
    throw new TypeError(
      `${where}: idempotency option mcp.keySources must be a non-empty list of 'argument', 'meta' and 'header', got ` +
        JSON.stringify(sources),
    );
  }
}

/** `maxCrashedOwners`: a whole number ≥ 0 (0 turns poisoning off). */
export function crashedOwners(value: unknown, where: string): number {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  throw new TypeError(
    `${where}: idempotency option maxCrashedOwners must be a whole number ≥ 0 (0: never poisoned), got ${String(value)}`,
  );
}

export function positiveSeconds(name: string, value: unknown, where: string): number {
  return positiveInteger(name, value, where, 'seconds');
}

export function positiveInteger(name: string, value: unknown, where: string, unit: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw new TypeError(
      `${where}: idempotency option ${name} must be a positive whole number of ${unit}, got ${String(value)}`,
    );
  }
  return value;
}

/** `partitionKeyValue`: a non-empty string or a function. */
export function partitionKeyValueOption<T>(value: T, where: string): T {
  if (value === undefined || typeof value === 'function' || (typeof value === 'string' && value.length > 0))
    return value;
  throw new TypeError(
    `${where}: idempotency option partitionKeyValue must be a non-empty string or a function, got ${String(value)}`,
  );
}
