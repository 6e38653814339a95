import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { TesseraError } from "@tessera/core";
import { sqliteUrlOf } from "@tessera/core/store-kit";
import type { ServerTimeouts } from "@tessera/server";
import type { z } from "zod";
import { checkDataDir, dataPath } from "./data-dir.js";
import { dataDirFromEnv } from "./env.js";
import {
  ClientEnvSchema,
  type ConfigFile,
  ConfigFileSchema,
  describeIssues,
  ServeEnvSchema,
} from "./schema.js";

/** What `tessera serve` runs with, after file, environment and flags (flags win). */
export interface ServeConfig {
  /** The data directory, absolute, when one was named. */
  readonly dataDir?: string;
  readonly store: string;
  /** Absent only with `identity`: a JWT-only deployment has no static tokens. */
  readonly principals?: string;
  /** The private claim directory, absolute. */
  readonly claims?: string;
  readonly host: string;
  readonly port: number;
  /** `proxy`: TLS is terminated in front of the service. */
  readonly tls?: "proxy";
  /** The webhook recipients file, absolute when it came from the data directory. */
  readonly webhooks?: string;
  /** The A2UI catalogs file. */
  readonly a2ui?: string;
  /** The identity provider's config file (JWT access tokens). */
  readonly identity?: string;
  /** The service's request timeouts given in any layer; absent ones take the service's defaults. */
  readonly timeouts?: ServerTimeouts;
}

export interface ServeFlags {
  data?: string;
  store?: string;
  principals?: string;
  host?: string;
  port?: number;
  webhooks?: string;
  a2ui?: string;
  identity?: string;
  headersTimeout?: number;
  requestTimeout?: number;
  keepAliveTimeout?: number;
  connectionTimeout?: number;
}

type Env = Readonly<Record<string, string | undefined>>;

export const DEFAULT_HOST = "127.0.0.1";
export const DEFAULT_PORT = 8787;

/**
 * Layers the configuration: the data directory's `tessera.json`, then `TESSERA_*` variables,
 * then flags. Each layer is validated on its own, so an error names where the bad value came
 * from (the file and key, the variable, the flag).
 */
export function loadServeConfig(flags: ServeFlags, env: Env = process.env): ServeConfig {
  // Before the schema: an empty TESSERA_DATA is refused in the words every command uses.
  const envData = dataDirFromEnv(env);
  const fromEnv = parseEnv(ServeEnvSchema, env);
  const data = flags.data ?? envData;
  const dataDir = data === undefined ? undefined : checkDataDir(data);
  const file = dataDir === undefined ? undefined : readConfigFile(dataDir);
  const inDir = (path: string | undefined) =>
    path === undefined || dataDir === undefined ? path : resolve(dataDir, path);

  const store = flags.store ?? fromEnv.TESSERA_STORE ?? storeInDir(file?.store, dataDir);
  const principals = flags.principals ?? fromEnv.TESSERA_PRINCIPALS ?? inDir(file?.principals);
  if (store === undefined) {
    throw new TesseraError(
      "invalid_config",
      "say where the store is: --data DIR (provisioned by tessera init), --store URL or TESSERA_STORE",
    );
  }
  const identity = flags.identity ?? fromEnv.TESSERA_IDENTITY ?? inDir(file?.identity);
  if (principals === undefined && identity === undefined) {
    throw new TesseraError(
      "invalid_config",
      "say who may call: --data DIR (provisioned by tessera init), --principals FILE or TESSERA_PRINCIPALS (static tokens), or --identity FILE or TESSERA_IDENTITY (the identity provider's JWTs)",
    );
  }
  const tls = fromEnv.TESSERA_TLS ?? file?.tls;
  const webhooks = flags.webhooks ?? fromEnv.TESSERA_WEBHOOKS ?? inDir(file?.webhooks);
  const a2ui = flags.a2ui ?? fromEnv.TESSERA_A2UI ?? inDir(file?.a2ui);
  const timeouts = layeredTimeouts(flags, fromEnv, file);
  // The claim directory is private to this machine: it serves the file's own store only. A
  // store named by flag or environment (PostgreSQL or Redis shared by several instances)
  // brings its own shared claims, which every instance must use.
  const storeFromFile = flags.store === undefined && fromEnv.TESSERA_STORE === undefined;
  const claims = storeFromFile ? inDir(file?.claims) : undefined;
  return Object.freeze({
    ...(dataDir === undefined ? {} : { dataDir }),
    store,
    ...(principals === undefined ? {} : { principals }),
    ...(claims === undefined ? {} : { claims }),
    host: flags.host ?? fromEnv.TESSERA_HOST ?? file?.host ?? DEFAULT_HOST,
    port: flags.port ?? fromEnv.TESSERA_PORT ?? file?.port ?? DEFAULT_PORT,
    ...(tls === undefined ? {} : { tls }),
    ...(webhooks === undefined ? {} : { webhooks }),
    ...(a2ui === undefined ? {} : { a2ui }),
    ...(identity === undefined ? {} : { identity }),
    ...(timeouts === undefined ? {} : { timeouts }),
  });
}

/** Each timeout from its flag, else its variable, else the file; undefined when none is given. */
function layeredTimeouts(
  flags: ServeFlags,
  env: z.output<typeof ServeEnvSchema>,
  file: ConfigFile | undefined,
): ServerTimeouts | undefined {
  const pick = (...values: (number | undefined)[]) => values.find((v) => v !== undefined);
  const timeouts = {
    headersTimeoutMs: pick(
      flags.headersTimeout,
      env.TESSERA_HEADERS_TIMEOUT_MS,
      file?.headersTimeoutMs,
    ),
    requestTimeoutMs: pick(
      flags.requestTimeout,
      env.TESSERA_REQUEST_TIMEOUT_MS,
      file?.requestTimeoutMs,
    ),
    keepAliveTimeoutMs: pick(
      flags.keepAliveTimeout,
      env.TESSERA_KEEP_ALIVE_TIMEOUT_MS,
      file?.keepAliveTimeoutMs,
    ),
    connectionTimeoutMs: pick(
      flags.connectionTimeout,
      env.TESSERA_CONNECTION_TIMEOUT_MS,
      file?.connectionTimeoutMs,
    ),
  };
  const given = Object.entries(timeouts).filter(([, value]) => value !== undefined);
  return given.length === 0 ? undefined : (Object.fromEntries(given) as ServerTimeouts);
}

/** Where a client command sends its requests, and with which bearer token. */
export interface ClientTarget {
  readonly url: string;
  readonly token: string;
}

/**
 * `--url`/`--token`, else `TESSERA_URL`/`TESSERA_TOKEN`, else the URL of the service a data
 * directory configures (`--data` or `TESSERA_DATA`). The token is never read from a file in the
 * data directory: only its digest is kept there.
 */
export function loadClientTarget(
  flags: { url?: string; token?: string; data?: string },
  env: Env = process.env,
): ClientTarget | undefined {
  const envData = dataDirFromEnv(env);
  const fromEnv = parseEnv(ClientEnvSchema, env);
  let url = flags.url === undefined ? fromEnv.TESSERA_URL : checkServiceUrl(flags.url, "--url");
  const token = flags.token ?? fromEnv.TESSERA_TOKEN;
  const data = flags.data ?? envData;
  if (url === undefined && data !== undefined) {
    const file = readConfigFile(checkDataDir(data));
    const host = file.host ?? DEFAULT_HOST;
    // Port 0 is whichever port serve was given at start: only serve's own line knows it.
    if (file.port === 0) {
      throw new TesseraError(
        "invalid_config",
        `the service of ${data} listens on a port chosen when it starts (port 0 in tessera.json): pass --url or TESSERA_URL with the address tessera serve printed`,
      );
    }
    url = `http://${host.includes(":") ? `[${host}]` : host}:${file.port ?? DEFAULT_PORT}`;
  }
  if (url === undefined && token === undefined) return undefined;
  if (url === undefined) {
    throw new TesseraError("invalid_config", "a token but no service: pass --url or TESSERA_URL");
  }
  if (token === undefined) {
    throw new TesseraError(
      "invalid_config",
      "no bearer token for the service: pass --token or set TESSERA_TOKEN",
    );
  }
  return Object.freeze({ url, token });
}

/**
 * A service URL from a flag, held to the rule `TESSERA_URL` is (the same schema field), so
 * `--url 127.0.0.1:8787` is the same `invalid_config` as the variable, not a crash in the client.
 */
export function checkServiceUrl(url: string, from: string): string {
  const parsed = ClientEnvSchema.shape.TESSERA_URL.safeParse(url);
  if (!parsed.success) throw new TesseraError("invalid_config", describeIssues(from, parsed.error));
  return url;
}

function parseEnv<S extends z.ZodType>(schema: S, env: Env): z.output<S> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new TesseraError("invalid_config", describeIssues("environment", parsed.error));
  }
  return parsed.data;
}

export function readConfigFile(dataDir: string): ConfigFile {
  const path = dataPath(dataDir, "config");
  let textValue: string;
  try {
    textValue = readFileSync(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") {
      throw new TesseraError(
        "data_dir_missing",
        `${dataDir} holds no tessera.json: it was not provisioned by tessera init`,
        { cause: error },
      );
    }
    throw new TesseraError("invalid_config", `${path} cannot be read (${code ?? "error"})`, {
      cause: error,
    });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(textValue);
  } catch (error) {
    throw new TesseraError("invalid_config", `${path} is not JSON`, { cause: error });
  }
  const parsed = ConfigFileSchema.safeParse(raw);
  if (!parsed.success) {
    throw new TesseraError("invalid_config", describeIssues(path, parsed.error));
  }
  return parsed.data;
}

/**
 * The store a data directory (`tessera init`) keeps its state in, as `serve --data` opens it:
 * the `store` of its `tessera.json`, a relative SQLite file resolved in the directory. The
 * directory is checked first (owner, mode), as serve checks it.
 */
export function dataDirStore(data: string): string {
  const dataDir = checkDataDir(data);
  const store = storeInDir(readConfigFile(dataDir).store, dataDir);
  if (store === undefined) {
    throw new TesseraError("invalid_config", `${dataPath(dataDir, "config")} names no store`);
  }
  return store;
}

/**
 * Where a data directory's service keeps its claims: its private claim directory when the
 * config names one (serve then claims every call there), else its store.
 */
export function dataDirClaims(data: string): { readonly dir?: string; readonly store?: string } {
  const dataDir = checkDataDir(data);
  const file = readConfigFile(dataDir);
  if (file.claims !== undefined) return { dir: resolve(dataDir, file.claims) };
  return { store: dataDirStore(data) };
}

/** A `sqlite:` file named relatively in the config file is the data directory's. */
function storeInDir(store: string | undefined, dataDir: string | undefined): string | undefined {
  if (store === undefined || dataDir === undefined || !store.startsWith("sqlite:")) return store;
  const rest = store.slice("sqlite:".length);
  if (rest.startsWith("/") || rest.startsWith(":memory:")) return store;
  const queryAt = rest.indexOf("?");
  const location = queryAt === -1 ? rest : rest.slice(0, queryAt);
  const query = queryAt === -1 ? "" : rest.slice(queryAt);
  if (isAbsolute(location)) return store;
  // The file as the backend reads it (percent-decoded), in the data directory, written back
  // escaped: the directory's own path may hold `%`, `?` or `#`.
  let file: string;
  try {
    file = decodeURIComponent(location);
  } catch {
    return store; // the backend refuses the malformed escape with its own message
  }
  return sqliteUrlOf(resolve(dataDir, file), query);
}
