import { randomBytes } from "node:crypto";
import { linkSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { threadId } from "node:worker_threads";
import { TesseraError } from "../contracts/errors.js";

/**
 * A cross-process lock held only around synchronous code, for appends that must read the
 * stream head and write under one lock. Node has no flock(2), so the lock is a file:
 *
 * - Taken by hard-linking a file already holding `pid threadId token` to the lock's path:
 *   link(2) fails if the path exists, and the lock never exists without its holder's name
 *   (an O_EXCL create followed by a write would leave an empty lock if the holder died
 *   between the two).
 * - Held by a process that has died, it is stale. Two processes could both find it stale, and
 *   the slower one would then delete the lock the faster one had just taken; so breaking a
 *   stale lock takes a second lock (`.break`), under which the lock is read again and removed
 *   only if it still names the dead holder. Nothing but a breaker removes another's lock.
 * - A `.break` lock left by a process killed in the few system calls it is held is not
 *   broken (the same race would return): after the bounded wait the append fails closed
 *   with `audit_unavailable`, naming the file an operator may remove.
 *
 * Only a lock taken on this host (by name) is judged: another container's pid means nothing
 * here, so its lock is waited for and never broken.
 *
 * Same process, same thread, is always stale: the lock is held only inside one synchronous
 * call, so when this thread looks, its own earlier holding has ended (a crash, then a new
 * process that got the same pid, as a container's first process does).
 */
export class FileLock {
  readonly #path: string;
  readonly #waitMs: number;
  readonly #token = newToken();
  /** A file holding our token, hard-linked to the lock's path to take it; made once. */
  #staged: string | undefined;

  constructor(path: string, waitMs: number) {
    this.#path = path;
    this.#waitMs = waitMs;
  }

  /** Runs `body` holding the lock; throws `audit_unavailable` if the lock cannot be had. */
  hold<T>(body: () => T): T {
    this.#acquire();
    try {
      return body();
    } finally {
      // Ours to remove: a live holder's lock is never broken, and we are alive.
      unlinkSync(this.#path);
    }
  }

  /** Removes the staged file; the lock itself is never held between calls. */
  close(): void {
    const staged = this.#staged;
    this.#staged = undefined;
    if (staged === undefined) return;
    removeQuietly(staged);
    stagedFiles.delete(staged);
  }

  #acquire(): void {
    if (this.#staged === undefined) {
      this.#staged = stage(this.#path, this.#token);
      leaveNoStagedFile(this.#staged);
    }
    const deadline = Date.now() + this.#waitMs;
    // Who holds the lock is read only now and then: a waiter's poll is then one link(2).
    let nextLook = 0;
    let pauseMs = 0.02;
    for (;;) {
      if (takeLock(this.#path, this.#staged)) return;
      const now = Date.now();
      if (now >= nextLook) {
        const holder = readHolder(this.#path);
        // A stale lock that cannot be broken (its breaker died too) waits out the deadline.
        if (holder !== undefined && isStale(holder) && this.#breakStale(holder)) continue;
        if (now > deadline) throw new TesseraError("audit_unavailable", this.#heldTooLong(holder));
        nextLook = now + 10;
      }
      pause(pauseMs * (0.5 + Math.random()));
      pauseMs = Math.min(pauseMs * 2, 1);
    }
  }

  #heldTooLong(holder: Holder | undefined): string {
    const breaker = readHolder(`${this.#path}.break`);
    if (breaker !== undefined && isStale(breaker)) {
      return `the audit log's lock ${this.#path}.break was left by process ${breaker.pid}, which has died; remove it if no process is breaking the lock`;
    }
    const held = holder === undefined ? "" : ` by process ${holder.pid}`;
    return `the audit log's lock ${this.#path} is held${held} past ${this.#waitMs} ms`;
  }

  /** True if the lock was gone or broken, so taking it is worth another try at once. */
  #breakStale(stale: Holder): boolean {
    const breakPath = `${this.#path}.break`;
    const token = newToken();
    const staged = stage(breakPath, token);
    try {
      // Another process is breaking it (or a dead breaker left this: see the class comment).
      if (!takeLock(breakPath, staged)) return false;
    } finally {
      removeQuietly(staged);
    }
    try {
      if (readHolder(this.#path)?.token === stale.token) {
        unlinkSync(this.#path);
        removeQuietly(stagedName(this.#path, stale.token));
      }
      return true;
    } finally {
      unlinkSync(breakPath);
    }
  }
}

interface Holder {
  readonly pid: number;
  readonly thread: number;
  readonly host: string;
  readonly token: string;
}

/** This machine's name as a lock names it (no spaces: the token is space-separated). */
const HOST = hostname().replace(/[^A-Za-z0-9.-]/g, "_") || "_";

function newToken(): string {
  return `${process.pid} ${threadId} ${HOST} ${randomBytes(12).toString("hex")}`;
}

/** Where a holder's token is staged: derived from it, so a breaker can remove it too. */
function stagedName(path: string, token: string): string {
  return `${path}.${token.replaceAll(" ", "-")}`;
}

function stage(path: string, token: string): string {
  const staged = stagedName(path, token);
  try {
    writeFileSync(staged, `${token}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    throw new TesseraError("audit_unavailable", `cannot stage the audit log's lock ${path}`, {
      cause: error,
    });
  }
  return staged;
}

/** Links the staged file to the lock's path, or returns false if the lock exists. */
function takeLock(path: string, staged: string): boolean {
  try {
    linkSync(staged, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw new TesseraError("audit_unavailable", `cannot take the audit log's lock ${path}`, {
      cause: error,
    });
  }
}

/** Staged files of sinks never closed, removed when the process exits normally. */
const stagedFiles = new Set<string>();
let exitHooked = false;

function leaveNoStagedFile(staged: string): void {
  if (!exitHooked) {
    exitHooked = true;
    process.once("exit", () => {
      for (const file of stagedFiles) removeQuietly(file);
    });
  }
  stagedFiles.add(staged);
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone.
  }
}

/** Who holds the lock, or undefined if no one (or it vanished while being read). */
function readHolder(path: string): Holder | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
  const [pid, thread, host] = text.split(" ");
  if (!Number.isSafeInteger(Number(pid)) || !Number.isSafeInteger(Number(thread))) return undefined;
  return { pid: Number(pid), thread: Number(thread), host: host ?? "", token: text.trim() };
}

function isStale(holder: Holder): boolean {
  // A pid means nothing on another machine or in another container: never break it.
  if (holder.host !== HOST) return false;
  if (holder.pid === process.pid) return holder.thread === threadId;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (error) {
    // EPERM: the process exists, under another user.
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** Blocks this thread for `ms`: the lock is held inside one synchronous append. */
function pause(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}
