import { type ChildProcess, execFile, spawn } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

/**
 * Database servers a test starts, owns, `kill -9`s and restarts on the same port and data
 * directory: a PostgreSQL cluster (`initdb` + `pg_ctl` in a temp folder) and a Redis server
 * (AOF `always`). Nothing shared with the machine's own servers.
 */
const run = promisify(execFile);

export interface OwnDatabase {
  readonly name: string;
  /** The store URL `tessera serve` and `openStores` take. */
  readonly url: string;
  /** SIGKILL of every process of the server, at once; resolves once they are gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port and data directory; resolves once it takes connections. */
  restart(): Promise<void>;
  /** Stops it and removes its folder. */
  remove(): Promise<void>;
}

/** The newest PostgreSQL server binaries of the machine (Debian layout), if any. */
export function postgresBin(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], "bin");
}

/** Where `redis-server` is on PATH, if it is. */
export function redisServerBin(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    const path = join(dir, "redis-server");
    if (dir !== "" && existsSync(path)) return path;
  }
  return undefined;
}

/** A port nobody listens on now (bound, read, released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Not yet reaped. A zombie counts as alive on purpose: PostgreSQL refuses to start while the
 * PID in its lock file exists, and the killed postmaster is reaped by PID 1, not by us.
 */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The processes whose parent is `pid` (PostgreSQL's backends and auxiliary processes). */
function children(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "pid (comm) state ppid …": comm may hold spaces, so read after its closing parenthesis.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

async function waitGone(pids: readonly number[]): Promise<void> {
  for (let i = 0; i < 200 && pids.some(alive); i++) await sleep(25);
  if (pids.some(alive)) throw new Error(`processes ${pids.join(",")} outlived SIGKILL`);
}

/**
 * Its own PostgreSQL cluster, `fsync=on` and `synchronous_commit=on`, on a free port. initdb
 * refuses root, so as root (CI) every command runs as the `postgres` OS user, owner of the folder.
 */
export async function startPostgres(bin: string): Promise<OwnDatabase> {
  const folder = mkdtempSync(join(tmpdir(), "tessera-pg-"));
  const data = join(folder, "data");
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const { stdout } = await run("id", ["-u", "postgres"]);
    const { stdout: gid } = await run("id", ["-g", "postgres"]);
    chownSync(folder, Number(stdout.trim()), Number(gid.trim()));
  }
  const as = (command: string, args: string[]) =>
    asRoot
      ? run("runuser", ["-u", "postgres", "--", join(bin, command), ...args])
      : run(join(bin, command), args);
  // --no-sync: the fresh cluster's files are not flushed at creation; the server's own writes are.
  await as("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  const port = await freePort();
  const options = [
    `-p ${port}`,
    `-k ${folder}`,
    "-c listen_addresses=127.0.0.1",
    "-c fsync=on",
    "-c synchronous_commit=on",
    "-c full_page_writes=on",
  ].join(" ");
  const start = () =>
    as("pg_ctl", [
      "-D",
      data,
      "-l",
      join(folder, "server.log"),
      "-w",
      "-t",
      "60",
      "-o",
      options,
      "start",
    ]);
  await start();
  const postmaster = () =>
    Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
  return {
    name: "PostgreSQL",
    url: `postgres://postgres@127.0.0.1:${port}/postgres?connectTimeoutMs=1000&statementTimeoutMs=3000`,
    kill: async () => {
      const pid = postmaster();
      const all = [pid, ...children(pid)];
      for (const p of all) process.kill(p, "SIGKILL");
      await waitGone(all);
    },
    restart: async () => {
      await start(); // crash recovery from the WAL, then it takes connections
    },
    remove: async () => {
      try {
        if (existsSync(join(data, "postmaster.pid"))) {
          await as("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => undefined);
        }
      } finally {
        rmSync(folder, { recursive: true, force: true });
      }
    },
  };
}

/** Its own `redis-server` on a free port: AOF with an fsync per write, data in a temp folder. */
export async function startRedis(bin: string): Promise<OwnDatabase> {
  const folder = mkdtempSync(join(tmpdir(), "tessera-redis-"));
  const port = await freePort();
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    folder,
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
    "--logfile",
    join(folder, "server.log"),
  ];
  let child: ChildProcess | undefined;
  const start = async () => {
    const started = spawn(bin, args, { stdio: "ignore" });
    child = started;
    for (let i = 0; ; i++) {
      if (started.exitCode !== null) throw new Error(`redis-server exited ${started.exitCode}`);
      const pong = await run("redis-cli", ["-p", String(port), "ping"]).catch(() => undefined);
      if (pong?.stdout.trim() === "PONG") return;
      if (i > 200) throw new Error("redis-server did not answer PING");
      await sleep(25);
    }
  };
  const kill = async () => {
    const pid = child?.pid;
    if (pid === undefined || child?.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGKILL");
    await waitGone([pid]);
  };
  await start();
  return {
    name: "Redis",
    url: `redis://127.0.0.1:${port}?connectTimeoutMs=1000&commandTimeoutMs=3000`,
    kill,
    restart: start, // replays the AOF before it answers PING
    remove: async () => {
      try {
        await kill();
      } finally {
        rmSync(folder, { recursive: true, force: true });
      }
    },
  };
}
