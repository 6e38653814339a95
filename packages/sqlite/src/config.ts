import { resolve } from "node:path";
import { TesseraError } from "@tessera/core";
import { flagOption } from "@tessera/core/store-kit";

/** What a `sqlite:` URL says. */
export interface SqliteConfig {
  /** Absolute file path, or `:memory:` (one connection, one process: tests only). */
  readonly path: string;
  /**
   * `FULL` (default): a commit is on disk before it returns, so a claim or a spent use
   * survives a power loss. `NORMAL` in WAL mode is several times faster and still survives a
   * process crash (kill -9), but the last commits before a power loss or OS crash may be lost,
   * which for a claim store means a call could run again after the machine reboots.
   */
  readonly synchronous: "FULL" | "NORMAL";
  /** How long a write waits for another process's write lock before failing closed. */
  readonly busyTimeoutMs: number;
  /** Prove the store's primitives at open (default true). */
  readonly selfTest: boolean;
  /**
   * Create the file when it does not exist (default true, for the embedded default). Workers
   * of a provisioned host should say `create=false`: a worker restarting after the file was
   * lost must fail closed, not start a fresh, empty claim history in which replays run again.
   */
  readonly create: boolean;
}

const OPTIONS = new Set(["synchronous", "busyTimeoutMs", "selfTest", "create"]);

/**
 * Parses `sqlite:./relative.db`, `sqlite:/absolute.db`, `sqlite:///absolute.db` and
 * `sqlite::memory:`, with options as a query string:
 * `?synchronous=normal&busyTimeoutMs=2000&selfTest=false&create=false`.
 */
export function parseSqliteUrl(url: string): SqliteConfig {
  if (typeof url !== "string" || !url.startsWith("sqlite:")) {
    throw new TesseraError("unsupported_store_url", "not a sqlite: URL");
  }
  // A fragment means nothing in a store URL. Read as part of the name, `a.db#x` would open a
  // fresh file beside `a.db`; a `#` in a file name is written `%23`.
  if (url.includes("#")) {
    throw new TesseraError(
      "invalid_config",
      "a sqlite URL takes no fragment (#…): write a # in the file name as %23",
    );
  }
  const rest = url.slice("sqlite:".length);
  const queryAt = rest.indexOf("?");
  let location = queryAt === -1 ? rest : rest.slice(0, queryAt);
  const query = new URLSearchParams(queryAt === -1 ? "" : rest.slice(queryAt + 1));
  const seen = new Set<string>();
  for (const key of query.keys()) {
    if (!OPTIONS.has(key)) throw new TesseraError("invalid_config", "unknown sqlite URL option");
    // Which of two values the operator meant cannot be known: refused, not guessed.
    if (seen.has(key)) {
      throw new TesseraError("invalid_config", `the sqlite URL gives ${key} more than once`);
    }
    seen.add(key);
  }
  if (location.startsWith("//")) location = location.slice(2);
  if (location === "") throw new TesseraError("invalid_config", "the sqlite URL names no file");
  return {
    path: location === ":memory:" ? location : resolve(fileName(location)),
    synchronous: synchronous(query.get("synchronous")),
    busyTimeoutMs: busyTimeout(query.get("busyTimeoutMs")),
    selfTest: flagOption(query.get("selfTest"), "selfTest"),
    create: flagOption(query.get("create"), "create"),
  };
}

/** The file name with its percent escapes decoded; a malformed one (`%zz`) is refused. */
function fileName(location: string): string {
  try {
    return decodeURIComponent(location);
  } catch {
    throw new TesseraError(
      "invalid_config",
      "the sqlite URL's file name holds a malformed percent escape: write a % in it as %25",
    );
  }
}

function synchronous(value: string | null): SqliteConfig["synchronous"] {
  if (value === null) return "FULL";
  const upper = value.toUpperCase();
  if (upper === "FULL" || upper === "NORMAL") return upper;
  throw new TesseraError("invalid_config", "synchronous must be full or normal");
}

function busyTimeout(value: string | null): number {
  if (value === null) return 5000;
  const ms = Number(value);
  if (!/^\d+$/.test(value) || ms > 600_000) {
    throw new TesseraError("invalid_config", "busyTimeoutMs must be an integer from 0 to 600000");
  }
  return ms;
}
