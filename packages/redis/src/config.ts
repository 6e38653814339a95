import { TesseraError } from "@tessera/core";
import { checkStoreUrlQuery, flagOption, redact } from "@tessera/core/store-kit";

/**
 * Everything `openStores` reads from its URL. Tessera's own settings ride in the query
 * string and are removed before the URL reaches ioredis (which would otherwise read any
 * query parameter as a client option).
 */
export interface RedisConfig {
  /** The URL handed to ioredis, without Tessera's own parameters. */
  readonly url: string;
  /** Prepended to every key, so runs and tenants sharing a server never collide. */
  readonly prefix: string;
  /** How long a claim (and its session index) lives: must cover the host session's lifetime. */
  readonly claimTtlMs: number;
  readonly connectTimeoutMs: number;
  /** A command without a reply after this long fails (closed) instead of waiting. */
  readonly commandTimeoutMs: number;
  /** `CLIENT SETNAME`: lets an operator (or an outage test) find our connections. */
  readonly connectionName: string;
  readonly selfTest: boolean;
  /**
   * Connect to a Redis Cluster through the URL's node (`cluster=true`): the prefix must then
   * open with a hash tag (`{name}`), so every key of the prefix, and so every script, lies in
   * one slot.
   */
  readonly cluster: boolean;
}

const SCHEMES = new Set(["redis:", "rediss:"]);
const PREFIX = /^[\w:.-]{1,64}$/;
/** A key prefix: PREFIX's characters, optionally after a leading hash tag (`{tenant}:`). */
const KEY_PREFIX = /^(?=.{1,64}$)(?:\{[\w:.-]+\})?[\w:.-]*$/;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * ioredis reads every query parameter of the URL it is given as a client option, and an option
 * in the URL wins over the one Tessera passes. These would undo how the store is set to fail
 * (an offline queue, commands re-sent after a reconnect, no timeout) or change what its
 * commands do (`keyPrefix` hides every key from the SCANs of `listInDoubt` and `endSession`,
 * `stringNumbers` changes reply types): refused, naming Tessera's own option where it has one.
 */
const DRIVER_OPTIONS: Readonly<Record<string, string | undefined>> = {
  enableOfflineQueue: undefined,
  maxRetriesPerRequest: undefined,
  autoResendUnfulfilledCommands: undefined,
  reconnectOnError: undefined,
  retryStrategy: undefined,
  lazyConnect: undefined,
  enableReadyCheck: undefined,
  readOnly: undefined,
  keyPrefix: "prefix",
  stringNumbers: undefined,
  commandTimeout: "commandTimeoutMs",
  connectTimeout: "connectTimeoutMs",
  connectionName: "name",
};

const NUMERIC_OPTIONS = {
  claimTtlMs: { fallback: 7 * DAY_MS, min: 1_000, max: 365 * DAY_MS },
  connectTimeoutMs: { fallback: 5_000, min: 1, max: 600_000 },
  commandTimeoutMs: { fallback: 5_000, min: 1, max: 600_000 },
} as const;

/** Tessera's own query options: read here and removed before the URL reaches ioredis. */
const TESSERA_OPTIONS: ReadonlySet<string> = new Set([
  "prefix",
  "name",
  "selfTest",
  "cluster",
  ...Object.keys(NUMERIC_OPTIONS),
]);

export function parseRedisUrl(url: string): RedisConfig {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TesseraError("unsupported_store_url", "the Redis store URL does not parse");
  }
  if (!SCHEMES.has(parsed.protocol)) {
    throw new TesseraError(
      "unsupported_store_url",
      `@tessera/redis serves redis:// URLs, not ${redact(parsed.protocol)}`,
    );
  }
  // ioredis drops the fragment, and with it whatever follows the `#`: an option, or the rest
  // of a password whose `#` was not written %23. A fragment means nothing here: refused.
  if (url.includes("#")) {
    throw new TesseraError(
      "invalid_config",
      "a Redis store URL takes no fragment (#…): write a # in a password or option as %23",
    );
  }
  // ioredis decodes the user name and password with decodeURIComponent, which throws on a
  // malformed escape (`%zz`): refused here, without echoing either.
  for (const [part, text] of [
    ["user name", parsed.username],
    ["password", parsed.password],
  ] as const) {
    try {
      decodeURIComponent(text);
    } catch {
      throw new TesseraError(
        "invalid_config",
        `the Redis store URL's ${part} holds a malformed percent escape: write a % in it as %25`,
      );
    }
  }
  const params = parsed.searchParams;
  checkStoreUrlQuery(params, "Redis", DRIVER_OPTIONS);
  const prefix = params.get("prefix") ?? "tessera:";
  if (!KEY_PREFIX.test(prefix)) {
    throw new TesseraError(
      "invalid_config",
      `prefix ${redact(prefix)} must match ${KEY_PREFIX.source}`,
    );
  }
  const cluster =
    params.get("cluster") === null ? false : flagOption(params.get("cluster"), "cluster");
  if (cluster && !prefix.startsWith("{")) {
    throw new TesseraError(
      "invalid_config",
      "on Redis Cluster the prefix must open with a hash tag, e.g. prefix={tessera}:, so that each script's keys share one slot",
    );
  }
  const numbers = {} as Record<keyof typeof NUMERIC_OPTIONS, number>;
  for (const [name, spec] of Object.entries(NUMERIC_OPTIONS)) {
    const raw = params.get(name);
    const value = raw === null ? spec.fallback : Number(raw);
    if (!Number.isInteger(value) || value < spec.min || value > spec.max) {
      throw new TesseraError(
        "invalid_config",
        `${name} must be an integer in [${spec.min}, ${spec.max}]`,
      );
    }
    numbers[name as keyof typeof NUMERIC_OPTIONS] = value;
  }
  const connectionName = params.get("name") ?? "tessera";
  if (!PREFIX.test(connectionName)) {
    throw new TesseraError(
      "invalid_config",
      `name ${redact(connectionName)} must match ${PREFIX.source}`,
    );
  }
  const selfTest = flagOption(params.get("selfTest"), "selfTest");
  for (const name of TESSERA_OPTIONS) params.delete(name);
  return { url: parsed.toString(), prefix, connectionName, selfTest, cluster, ...numbers };
}
