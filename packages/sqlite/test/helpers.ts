import { spawn } from "node:child_process";
import { mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStores, type SqliteStores } from "@tessera/sqlite";
import type { OutageControl } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";

const PACKAGE_DIR = new URL("..", import.meta.url);

/**
 * Runs `script` as an ES module in a child Node process (`command` before it, as `runuser -u
 * nobody --`), from this package's folder so it imports `@tessera/sqlite` as a host would.
 * Answers its standard output; rejects, with its standard error, when it exits otherwise than 0.
 */
export function runScript(
  script: string,
  args: readonly string[],
  command: readonly string[] = [],
): Promise<string> {
  const node = [process.execPath, "--input-type=module", "-e", script, ...args];
  const [program, ...rest] = [...command, ...node] as [string, ...string[]];
  return new Promise((resolve, reject) => {
    const child = spawn(program, rest, { cwd: PACKAGE_DIR, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    child.stderr.on("data", (chunk) => {
      err += chunk;
    });
    child.on("close", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`the script exited ${code}: ${err}`)),
    );
  });
}

/** A fresh database file in its own private directory, removed by `dispose`. */
export function freshFile(): { path: string; dispose(): void } {
  const dir = mkdtempSync(join(tmpdir(), "tessera-sqlite-"));
  return {
    path: join(dir, "tessera.db"),
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface OpenedSqlite {
  readonly stores: SqliteStores;
  /** The file's URL with default options, as another process would open it. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Opens a fresh file. This process uses a short busy timeout (the time a write waits for
 * another connection's lock before failing closed) to keep the outage cases quick: the
 * driver is synchronous, so a wait blocks the event loop. Worker processes open `url` with
 * the default timeout, as a host would.
 */
export async function openFresh(options = "busyTimeoutMs=50"): Promise<OpenedSqlite> {
  const file = freshFile();
  const url = `sqlite:${file.path}`;
  const stores = await openStores(`${url}?${options}`);
  return {
    stores,
    url,
    close: async () => {
      await stores.close();
      file.dispose();
    },
  };
}

/**
 * A real SQLite outage: another connection (as a backup tool or a stuck process would)
 * holds the write lock longer than the store's busy timeout. Writes then fail closed;
 * WAL readers are never blocked by a writer, so reads keep answering correctly — hence
 * "blip": each operation either fails with the port's code or answers correctly.
 */
export function writeLockOutage(url: string): OutageControl {
  let holder: BetterSqlite3.Database | undefined;
  return {
    kind: "blip",
    async interrupt() {
      holder = new BetterSqlite3(url.slice("sqlite:".length));
      holder.pragma("busy_timeout = 5000");
      holder.exec("BEGIN IMMEDIATE");
    },
    async restore() {
      holder?.exec("ROLLBACK");
      holder?.close();
      holder = undefined;
    },
  };
}

/**
 * The database file disappears from its path (moved away by an operator, a restore, a bad
 * deploy) and later comes back. While it is away every operation, reads included, must fail
 * with the port's code: the connection still has the old file open, but anything it did
 * there would be invisible to every process that opens the path meanwhile.
 */
export function fileMovedOutage(url: string): OutageControl {
  const path = url.slice("sqlite:".length);
  const away = `${path}.away`;
  return {
    kind: "down",
    async interrupt() {
      renameSync(path, away);
    },
    async restore() {
      renameSync(away, path);
    },
  };
}
