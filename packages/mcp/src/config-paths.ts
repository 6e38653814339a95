import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { TesseraError } from "@tessera/core";
import { sqliteUrlOf } from "@tessera/core/store-kit";

/*
 * Paths in a gateway config file mean the file's folder, not the working directory of whoever
 * started the gateway: a desktop app starts MCP servers from `/`, and a store path read against
 * `/` opens (or made) another database, with none of the claims that refuse replays.
 */

interface SqliteFile {
  /** The file as the sqlite backend reads it (percent-decoded), maybe relative. */
  readonly path: string;
  /** The query string with its `?`, or "". */
  readonly query: string;
}

/** The file a `sqlite:` URL names (`sqlite:x.db`, `sqlite:/x.db`, `sqlite:///x.db`); not `:memory:`. */
function sqliteFile(url: string): SqliteFile | undefined {
  if (!url.startsWith("sqlite:")) return undefined;
  const rest = url.slice("sqlite:".length);
  const queryAt = rest.indexOf("?");
  let location = queryAt === -1 ? rest : rest.slice(0, queryAt);
  if (location.startsWith("//")) location = location.slice(2);
  if (location === "" || location === ":memory:") return undefined;
  let path: string;
  try {
    path = decodeURIComponent(location);
  } catch {
    // The backend refuses it with its own message.
    return undefined;
  }
  return { path, query: queryAt === -1 ? "" : rest.slice(queryAt) };
}

/** A relative `sqlite:` file as the one in `baseDir`; any other URL as it is. */
export function storeInFolder(url: string, baseDir: string): string {
  const file = sqliteFile(url);
  if (file === undefined || isAbsolute(file.path)) return url;
  return sqliteUrlOf(resolve(baseDir, file.path), file.query);
}

/**
 * The store URL to open, never creating a database by accident: a `sqlite:` file must exist
 * unless the URL itself says `create=true`. A missing file is refused with its path, and the URL
 * opened says `create=false`, so a file removed after this check is not made afresh either.
 * (A fresh file is an empty claim history: every replay of an earlier call would run again.)
 */
export function existingStore(url: string): string {
  const file = sqliteFile(url);
  if (file === undefined) return url;
  const options = new URLSearchParams(file.query.slice(1));
  if (options.has("create")) {
    // Explicit either way: `create=true` is the operator's decision, `create=false` already safe.
    return url;
  }
  const path = resolve(file.path);
  if (!existsSync(path)) {
    throw new TesseraError(
      "store_unavailable",
      `no database at ${path}: the gateway never creates one (an empty store would forget every claim, so replays would run again); provision it with \`tessera init DIR\` and name DIR/tessera.db, or add ?create=true to the URL to create it on purpose`,
    );
  }
  return `${url}${file.query === "" ? "?" : "&"}create=false`;
}
