/**
 * One database file under two names. SQLite keeps the WAL and the shared-memory index beside
 * the name it was opened by (`<name>-wal`, `<name>-shm`), so two processes that reach the
 * same file through a hard link, or through a bind mount of the file alone (a container that
 * mounts only the database), each write their own WAL and never see the other's commits:
 * every call ID is claimed twice and every single-use ticket spent twice. The store refuses
 * such a file (`store_file_shared`); these cases run the race in real OS processes.
 */
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from "node:child_process";
import { linkSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { openStores } from "@tessera/sqlite";
import { afterEach, describe, expect, it } from "vitest";
import { freshFile } from "./helpers.js";

const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
/** Call IDs claimed and single-use tickets spent by each process. */
const KEYS = 400;

/**
 * Opens the store, says "ready", waits for "go" on stdin (so both processes are open before
 * either writes), then claims every key and spends every ticket once.
 */
const SCRIPT = `
import { openStores } from "@tessera/sqlite";
const [url, keys] = process.argv.slice(1);
let stores;
try {
  stores = await openStores(url);
} catch (error) {
  process.stdout.write(JSON.stringify({ refused: error.code, message: error.message }) + "\\n");
  process.exit(0);
}
process.stdout.write("ready\\n");
await new Promise((resolve) => process.stdin.once("data", resolve));
let claimed = 0;
let spent = 0;
for (let i = 0; i < Number(keys); i++) {
  const claim = await stores.claims.claim({ session: "s", functionCallId: "call-" + i }, {
    bodyHash: "b", claimedAt: i,
  });
  if (claim.status === "claimed") claimed++;
  if ((await stores.usage.tryConsume("ns", "ticket-" + i, 1)).consumed) spent++;
}
await stores.close();
process.stdout.write(JSON.stringify({ claimed, spent }) + "\\n");
`;

type Result = { claimed: number; spent: number } | { refused: string; message: string };

interface Racer {
  readonly child: ChildProcessWithoutNullStreams;
  /** Resolves when the store is open ("ready") or was refused (the result). */
  readonly opened: Promise<void>;
  readonly result: Promise<Result>;
}

/** `command` ends with the node invocation; SCRIPT's arguments are appended to it. */
function racer(command: readonly string[], url: string): Racer {
  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, [...args, "--input-type=module", "-e", SCRIPT, url, String(KEYS)], {
    cwd: PACKAGE_DIR,
  });
  let out = "";
  let err = "";
  let markOpened: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    markOpened = resolve;
  });
  child.stderr.on("data", (chunk) => {
    err += chunk;
  });
  // A racer the store refused exits right after saying so; "go" then meets a closed pipe.
  // That EPIPE is expected; any other failure to write shows in the racer's error text.
  child.stdin.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") err += `stdin: ${error.message}`;
  });
  const result = new Promise<Result>((resolve, reject) => {
    child.stdout.on("data", (chunk) => {
      out += chunk;
      if (out.includes("\n")) markOpened();
    });
    child.on("close", (code) => {
      markOpened();
      const last = out.trim().split("\n").at(-1) ?? "";
      if (code === 0 && last.startsWith("{")) resolve(JSON.parse(last) as Result);
      else reject(new Error(`racer exited ${code}: ${err || out}`));
    });
  });
  return { child, opened, result };
}

/** Starts every racer, waits until each has opened (or been refused), then releases them. */
async function race(racers: readonly Racer[]): Promise<Result[]> {
  await Promise.all(racers.map((r) => r.opened));
  for (const r of racers) r.child.stdin.end("go\n");
  return Promise.all(racers.map((r) => r.result));
}

const NODE = [process.execPath];
const won = (results: Result[], what: "claimed" | "spent") =>
  results.reduce((sum, r) => sum + ("refused" in r ? 0 : r[what]), 0);

const files: { dispose(): void }[] = [];
function provisioned(): Promise<string> {
  const file = freshFile();
  files.push(file);
  return openStores(`sqlite:${file.path}`).then(async (stores) => {
    await stores.close();
    return file.path;
  });
}
afterEach(() => {
  for (const file of files.splice(0)) file.dispose();
});

async function codeOf(action: () => unknown): Promise<{ code?: string; message?: string }> {
  try {
    await action();
  } catch (error) {
    return error as { code?: string; message?: string };
  }
  return {};
}

describe("one file, one name", () => {
  it("control: two processes on the same name split nothing (each key won once)", async () => {
    const path = await provisioned();
    const results = await race([racer(NODE, `sqlite:${path}`), racer(NODE, `sqlite:${path}`)]);
    expect(won(results, "claimed")).toBe(KEYS);
    expect(won(results, "spent")).toBe(KEYS);
  });

  it("a hard link: neither name opens, so no call is claimed twice and no ticket spent twice", async () => {
    const path = await provisioned();
    const second = join(path, "..", "second-name.db");
    linkSync(path, second);
    const results = await race([racer(NODE, `sqlite:${path}`), racer(NODE, `sqlite:${second}`)]);
    // The invariant first: across both names, each key is won at most once.
    expect(won(results, "claimed")).toBeLessThanOrEqual(KEYS);
    expect(won(results, "spent")).toBeLessThanOrEqual(KEYS);
    for (const result of results) {
      expect(result).toMatchObject({ refused: "store_file_shared" });
      expect((result as { message: string }).message).toMatch(/never the file/);
    }
    // Once the second name is gone the file opens again.
    rmSync(second);
    await (await openStores(`sqlite:${path}`)).close();
  });

  it("a hard link made while the store is open: every operation fails closed until it is removed", async () => {
    const path = await provisioned();
    const stores = await openStores(`sqlite:${path}`);
    const key = { session: "s", functionCallId: "c" };
    await stores.claims.claim(key, { bodyHash: "h", claimedAt: 1 });
    const second = join(path, "..", "second-name.db");
    linkSync(path, second);
    const refused = await codeOf(() => stores.claims.claim(key, { bodyHash: "h", claimedAt: 2 }));
    expect(refused.code).toBe("claim_store_unavailable");
    expect(refused.message).toMatch(/second name/);
    expect((await codeOf(() => stores.usage.tryConsume("ns", "g", 1))).code).toBe(
      "usage_store_unavailable",
    );
    expect((await codeOf(() => stores.audit.read())).code).toBe("audit_unavailable");
    rmSync(second);
    expect(await stores.usage.tryConsume("ns", "g", 1)).toEqual({ consumed: true, used: 1 });
    await stores.close();
  });

  it.each(["-wal", "-shm"])(
    "a side file (%s) with a second name is refused at open",
    async (suffix) => {
      const path = await provisioned();
      // A writer keeps the side files in place (the last connection to close removes the WAL).
      const holder = await openStores(`sqlite:${path}`);
      linkSync(`${path}${suffix}`, join(path, "..", `elsewhere${suffix}`));
      expect((await codeOf(() => openStores(`sqlite:${path}`))).code).toBe("store_file_shared");
      await holder.close();
    },
  );
});

/**
 * The container case: the file alone bind-mounted under another path. Run inside a private
 * mount namespace (`unshare -m`), so the mount disappears with the child process.
 */
const canUnshare =
  process.platform === "linux" &&
  spawnSync("unshare", ["-m", "--propagation", "private", "true"]).status === 0;

/** Runs node in a private mount namespace in which `source` is bind-mounted on `target`. */
function mountedThen(source: string, target: string): string[] {
  return [
    "unshare",
    "-m",
    "--propagation",
    "private",
    "sh",
    "-c",
    'mount --bind "$1" "$2" && shift 2 && exec "$@"',
    "sh",
    source,
    target,
    process.execPath,
  ];
}

describe.skipIf(!canUnshare)(
  "bind mounts (need unshare -m: root or user namespaces; skipped without)",
  () => {
    it("the file alone mounted: the mounted name is refused; the original works; no key is won twice", async () => {
      const path = await provisioned();
      const mounted = join(path, "..", "mounted.db");
      writeFileSync(mounted, "");
      const results = await race([
        racer(NODE, `sqlite:${path}`),
        racer(mountedThen(path, mounted), `sqlite:${mounted}`),
      ]);
      expect(won(results, "claimed")).toBeLessThanOrEqual(KEYS);
      expect(won(results, "spent")).toBeLessThanOrEqual(KEYS);
      expect(results[0]).toEqual({ claimed: KEYS, spent: KEYS });
      expect(results[1]).toMatchObject({ refused: "store_file_shared" });
    });

    it("the directory mounted (the advice): both names open and each key is won exactly once", async () => {
      const path = await provisioned();
      const elsewhere = mkdtempSync(join(tmpdir(), "tessera-sqlite-mount-"));
      files.push({ dispose: () => rmSync(elsewhere, { recursive: true, force: true }) });
      const results = await race([
        racer(NODE, `sqlite:${path}`),
        racer(mountedThen(dirname(path), elsewhere), `sqlite:${join(elsewhere, basename(path))}`),
      ]);
      expect(results.every((r) => !("refused" in r))).toBe(true);
      expect(won(results, "claimed")).toBe(KEYS);
      expect(won(results, "spent")).toBe(KEYS);
    });
  },
);
