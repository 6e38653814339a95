import { closeSync, existsSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { TesseraError } from "@tessera/core";

/**
 * An exclusive lock across processes for a read-modify-rename of one file: two `tessera tokens`
 * editing the same principals file at once would each rewrite it from their own read, so one
 * edit would be lost, and a revoked token could come back with the other's copy.
 *
 * Node has no `flock`, so the lock is a file beside the edited one, created with O_EXCL (only
 * one process can create it) and removed when the edit is done. It holds the holder's pid and
 * host, so that a lock left by a process that died mid-edit (killed, power cut) is taken over
 * rather than blocking every later edit until someone removes it by hand.
 */

/** How long an edit waits for the lock before it gives up (a rewrite takes milliseconds). */
const DEFAULT_WAIT_MS = 5_000;
const FIRST_PAUSE_MS = 5;
const LONGEST_PAUSE_MS = 100;

export interface FileLockOptions {
  /** How long to wait for another holder; then `unavailable`. */
  waitMs?: number;
}

/** The lock file's path for `target`: beside it, so it sits on the same file system. */
export function lockPathFor(target: string): string {
  return `${target}.lock`;
}

/**
 * Runs `edit` while holding the lock on `target` (a real path: the caller resolves symlinks,
 * so every name of one file shares one lock). A holder that does not let go within `waitMs`
 * is `unavailable`, naming the lock file, and `edit` never runs: nothing was changed.
 */
export function withFileLock<T>(target: string, edit: () => T, options: FileLockOptions = {}): T {
  const lockPath = lockPathFor(target);
  acquire(lockPath, target, options.waitMs ?? DEFAULT_WAIT_MS);
  try {
    return edit();
  } finally {
    // Ours alone: no other process removes a lock whose holder is alive.
    rmSync(lockPath, { force: true });
  }
}

function acquire(lockPath: string, target: string, waitMs: number): void {
  const deadline = Date.now() + waitMs;
  let pause = FIRST_PAUSE_MS;
  for (;;) {
    if (tryCreate(lockPath, "lock")) return;
    if (takeOverAbandoned(lockPath)) continue;
    if (Date.now() >= deadline) throw stillHeld(lockPath, target, waitMs);
    // Jittered, so processes that collided do not keep colliding in step.
    sleep(pause / 2 + Math.random() * pause);
    pause = Math.min(pause * 2, LONGEST_PAUSE_MS);
  }
}

/** Creates `path` holding this process's pid and host; false when it is already there. */
function tryCreate(path: string, what: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx", 0o600);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    throw new TesseraError(
      "invalid_usage",
      `cannot create the ${what} file ${path} (${code ?? "error"}): tessera tokens needs to write in the principals file's directory`,
      { cause: error },
    );
  }
  try {
    writeSync(fd, `${process.pid} ${hostname()}\n`);
  } finally {
    closeSync(fd);
  }
  return true;
}

interface Holder {
  pid: number;
  host: string;
}

/** Who holds the lock, as its file says; undefined when it is gone, empty or unreadable. */
function holderOf(lockPath: string): Holder | undefined {
  let text: string;
  try {
    text = readFileSync(lockPath, "utf8");
  } catch {
    return undefined;
  }
  const match = /^(\d+) (\S+)\n$/.exec(text);
  if (match === null) return undefined;
  return { pid: Number(match[1]), host: match[2] as string };
}

/**
 * Removes the lock when its holder is a process of this host that no longer runs, so the
 * caller may try again. Only with a second O_EXCL file (the takeover guard) held: two
 * processes that both found the same dead holder must not both remove "the" lock, since the
 * second would remove the lock the first had just taken. With the guard held the lock file
 * cannot change under us (its dead holder will not remove it, nobody creates it while it is
 * there, and only the guard's holder takes one over), so the holder is read again under it.
 *
 * A holder on another host (a shared file system), or one that cannot be told, is never taken
 * over: its pid means nothing here. A lock whose file is empty (its holder died between
 * creating and writing it) is left for the operator, whom the timeout names it to.
 */
function takeOverAbandoned(lockPath: string): boolean {
  if (!isAbandoned(holderOf(lockPath))) return false;
  const guard = `${lockPath}.takeover`;
  if (!tryCreate(guard, "lock takeover")) return false;
  try {
    if (!isAbandoned(holderOf(lockPath))) return false;
    rmSync(lockPath, { force: true });
    return true;
  } finally {
    rmSync(guard, { force: true });
  }
}

function isAbandoned(holder: Holder | undefined): boolean {
  return holder !== undefined && holder.host === hostname() && !isRunning(holder.pid);
}

function isRunning(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

function stillHeld(lockPath: string, target: string, waitMs: number): TesseraError {
  const holder = holderOf(lockPath);
  const who = holder === undefined ? "an unknown process" : `pid ${holder.pid} on ${holder.host}`;
  // A takeover guard left behind (its holder died in the microseconds it holds one) stops
  // every takeover: name it too, so one look at the message clears both.
  const guard = `${lockPath}.takeover`;
  const alsoGuard = existsSync(guard) ? ` (and ${guard})` : "";
  return new TesseraError(
    "unavailable",
    `${target} is locked by ${who} (another tessera tokens editing it) and was not released within ${waitMs} ms; nothing was changed. Try again; if no tessera tokens is running, remove ${lockPath}${alsoGuard}`,
  );
}

/** A blocking pause: the edits around it are synchronous, and a CLI has nothing else to do. */
function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
