import { TesseraError } from "@tessera/core";
import { checkStoreUrlQuery, flagOption, redact } from "@tessera/core/store-kit";

/**
 * Everything `openStores` reads from its URL. Tessera's own settings ride in the query
 * string and are removed before the rest goes to `pg`, so a typo in one of them is refused
 * here instead of being passed to the server as an unknown startup parameter.
 */
export interface PostgresConfig {
  /** The connection string handed to `pg`, without Tessera's own parameters. */
  readonly connectionString: string;
  /** The schema every table lives in; one per test run or tenant. */
  readonly schema: string;
  readonly poolMax: number;
  readonly connectTimeoutMs: number;
  readonly statementTimeoutMs: number;
  readonly idleTimeoutMs: number;
  /** Shown in `pg_stat_activity`, so an operator (or an outage test) can find our sessions. */
  readonly applicationName: string;
  /** Run the probe self-test at open (on by default; off only for benchmarks of open itself). */
  readonly selfTest: boolean;
}

const SCHEMES = new Set(["postgres:", "postgresql:"]);

/** A plain lower-case identifier: it is quoted into DDL, so nothing else may get through. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

const NUMERIC_OPTIONS = {
  poolMax: { param: "poolMax", fallback: 10, min: 1, max: 1000 },
  connectTimeoutMs: { param: "connectTimeoutMs", fallback: 5_000, min: 1, max: 600_000 },
  statementTimeoutMs: { param: "statementTimeoutMs", fallback: 5_000, min: 1, max: 600_000 },
  idleTimeoutMs: { param: "idleTimeoutMs", fallback: 10_000, min: 1, max: 3_600_000 },
} as const;

/** Tessera's own query options: read here and removed before the URL reaches `pg`. */
const TESSERA_OPTIONS: ReadonlySet<string> = new Set([
  "schema",
  "selfTest",
  "application_name",
  ...Object.values(NUMERIC_OPTIONS).map((o) => o.param),
]);

/**
 * `pg` reads these from the connection string, and a value there wins over the one Tessera
 * passes: `statement_timeout=0` would let a statement stuck behind a lock wait on the server
 * for ever, `query_timeout` would move (or, at 0, break) the client's own limit, `binary` and
 * `replication` change what a connection answers. Refused, naming Tessera's option.
 */
const DRIVER_OPTIONS: Readonly<Record<string, string | undefined>> = {
  statement_timeout: "statementTimeoutMs",
  query_timeout: "statementTimeoutMs",
  binary: undefined,
  replication: undefined,
};

export function parsePostgresUrl(url: string): PostgresConfig {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TesseraError("unsupported_store_url", "the PostgreSQL store URL does not parse");
  }
  if (!SCHEMES.has(parsed.protocol)) {
    throw new TesseraError(
      "unsupported_store_url",
      `@tessera/postgres serves postgres:// URLs, not ${redact(parsed.protocol)}`,
    );
  }
  // pg drops the fragment, and with it whatever follows the `#`: an option, or the rest of a
  // password whose `#` was not written %23. A fragment means nothing here: refused.
  if (url.includes("#")) {
    throw new TesseraError(
      "invalid_config",
      "a PostgreSQL store URL takes no fragment (#…): write a # in a password or option as %23",
    );
  }
  const params = parsed.searchParams;
  checkStoreUrlQuery(params, "PostgreSQL", DRIVER_OPTIONS);
  const schema = params.get("schema") ?? "tessera";
  if (!SCHEMA_NAME.test(schema)) {
    throw new TesseraError(
      "invalid_config",
      `schema ${redact(schema)} must match ${SCHEMA_NAME.source} (it is quoted into DDL)`,
    );
  }
  const numbers = {} as Record<keyof typeof NUMERIC_OPTIONS, number>;
  for (const [key, spec] of Object.entries(NUMERIC_OPTIONS)) {
    const raw = params.get(spec.param);
    const value = raw === null ? spec.fallback : Number(raw);
    if (!Number.isInteger(value) || value < spec.min || value > spec.max) {
      throw new TesseraError(
        "invalid_config",
        `${spec.param} must be an integer in [${spec.min}, ${spec.max}]`,
      );
    }
    numbers[key as keyof typeof NUMERIC_OPTIONS] = value;
  }
  const selfTest = flagOption(params.get("selfTest"), "selfTest");
  const applicationName = params.get("application_name") ?? "tessera";
  for (const name of TESSERA_OPTIONS) params.delete(name);
  return {
    connectionString: parsed.toString(),
    schema,
    applicationName,
    selfTest,
    ...numbers,
  };
}
