/**
 * A denial's event written after its reply commits without its own fsync (synchronous=NORMAL,
 * as a claim receipt does), and the WAL is fsynced within `UNFLUSHED_BOUND_MS` of such a
 * commit even when no commit at FULL follows. A crash of the process loses none of what was
 * committed so: a worker killed with SIGKILL right after its denials were written leaves
 * every one of them in the file.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { openStores } from "@tessera/sqlite";
import { auditEvent } from "@tessera/testkit";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SqliteAuditSink } from "../src/audit-sink.js";
import { parseSqliteUrl } from "../src/config.js";
import { SqliteDatabase } from "../src/database.js";
import { migrate } from "../src/migrations.js";
import { UNFLUSHED_BOUND_MS, WalSync } from "../src/wal-sync.js";
import { freshFile } from "./helpers.js";

const FULL = 2;
const NORMAL = 1;
const AFTER_REPLY = { unflushed: true } as const;

const cleanups: (() => void)[] = [];
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function open() {
  const file = freshFile();
  const db = SqliteDatabase.open(parseSqliteUrl(`sqlite:${file.path}`), "audit_unavailable");
  migrate(db, "audit_unavailable");
  cleanups.push(() => {
    db.close();
    file.dispose();
  });
  return { db, audit: new SqliteAuditSink(db), file };
}

/** The `synchronous` level each audit insert ran at, in order. */
function levels(db: SqliteDatabase): number[] {
  const seen: number[] = [];
  const original = SqliteDatabase.prototype.statement;
  vi.spyOn(SqliteDatabase.prototype, "statement").mockImplementation(function (
    this: SqliteDatabase,
    sql: string,
  ) {
    if (sql.startsWith("INSERT INTO tessera_audit ")) seen.push(db.pragma("synchronous") as number);
    return original.call(this, sql);
  });
  return seen;
}

const denial = (i: number) => auditEvent(2 * i + 1, { namespaceId: "ns", callId: `d-${i}` });

describe("SQLite denials written after their reply", () => {
  it("a batch of them commits at NORMAL, FULL is back after it, and the WAL is synced within the bound", async () => {
    // Only the timers are faked: the sync's fsync runs on the real thread pool.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const { db, audit } = open();
    const seen = levels(db);
    const sync = db.walSync as WalSync;
    expect(sync.pending).toBe(false);

    await Promise.all([0, 1, 2].map((i) => audit.append(denial(i), AFTER_REPLY)));
    expect(seen).toEqual([NORMAL, NORMAL, NORMAL]);
    expect(db.pragma("synchronous")).toBe(FULL);
    expect(sync.pending).toBe(true);

    // Not yet: the timer was armed by the batch's commit and has not come due.
    vi.advanceTimersByTime(UNFLUSHED_BOUND_MS - 1);
    await sync.settled();
    expect(sync.synced).toBe(0);
    expect(sync.pending).toBe(true);

    vi.advanceTimersByTime(1);
    await sync.settled();
    expect(sync.synced).toBe(1);
    expect(sync.pending).toBe(false);
    expect(sync.failing).toBe(false);

    // Nothing unflushed since: no timer, no further sync.
    vi.advanceTimersByTime(10 * UNFLUSHED_BOUND_MS);
    await sync.settled();
    expect(sync.synced).toBe(1);
    expect((await audit.read()).map((event) => event.callId)).toEqual(["d-0", "d-1", "d-2"]);
  });

  it("an event appended without the option (before its reply) is on disk before it is answered", async () => {
    const { db, audit } = open();
    const sync = db.walSync as WalSync;
    const seen = levels(db);
    // Alone: its commit fsyncs at FULL.
    await audit.append(denial(0));
    expect(sync.synced).toBe(0);
    // The second of two issued together is batched: committed at NORMAL, answered after the
    // WAL's fsync on the thread pool.
    await Promise.all([audit.append(denial(1)), audit.append(denial(2))]);
    expect(seen).toEqual([FULL, FULL, NORMAL]);
    expect(sync.synced).toBe(1);
    expect(sync.pending).toBe(false);
  });

  it("while the WAL sync fails, denials take their fsync again", async () => {
    const { db, audit } = open();
    const sync = db.walSync as WalSync;
    vi.spyOn(sync, "failing", "get").mockReturnValue(true);
    const seen = levels(db);
    await audit.append(denial(0), AFTER_REPLY);
    expect(seen).toEqual([FULL]);
    expect(sync.pending).toBe(false);
  });

  it("a sync that fails is failing and tried again after the bound", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const file = freshFile();
    cleanups.push(() => file.dispose());
    writeFileSync(file.path, "");
    // Its WAL path runs through a regular file: opening it fails with ENOTDIR.
    const sync = new WalSync(join(file.path, "tessera.db"));
    sync.committed();
    vi.advanceTimersByTime(UNFLUSHED_BOUND_MS);
    await sync.settled();
    expect(sync.failing).toBe(true);
    expect(sync.synced).toBe(0);
    // Re-armed: the next attempt comes one bound later, and fails the same way.
    expect(sync.pending).toBe(true);
    vi.advanceTimersByTime(UNFLUSHED_BOUND_MS);
    await sync.settled();
    expect(sync.failing).toBe(true);
    sync.close();
  });

  it("a worker killed with SIGKILL after its denials were written leaves every one of them", async () => {
    const file = freshFile();
    cleanups.push(() => file.dispose());
    const url = `sqlite:${file.path}`;
    const count = 40;
    const worker = spawn(process.execPath, ["--input-type=module", "-e", WORKER], {
      cwd: fileURLToPath(new URL("..", import.meta.url)),
      env: { ...process.env, TESSERA_URL: url, DENIALS: String(count) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    worker.stderr.on("data", (chunk) => {
      stderr += String(chunk);
    });
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) => {
      worker.on("exit", (code, signal) => resolve(signal ?? code));
    });
    // "written": every denial was answered, then its window closed and its batch committed.
    const written = await new Promise<string>((resolve) => {
      let out = "";
      worker.stdout.on("data", (chunk) => {
        out += String(chunk);
        if (out.includes("\n")) resolve(out.trim());
      });
      worker.on("exit", () => resolve(`exited: ${stderr}`));
    });
    expect(written).toBe("written");
    worker.kill("SIGKILL");
    expect(await exited).toBe("SIGKILL");

    const stores = await openStores(url);
    try {
      const events = await stores.audit.read();
      const ids = events.map((event) => event.callId).sort();
      expect(ids).toEqual(Array.from({ length: count }, (_, i) => `d-${i}`).sort());
      expect(events.every((event) => event.outcome === "denied")).toBe(true);
    } finally {
      await stores.close();
    }
  });
});

/**
 * The worker: a kernel over the SQLite stores (act ledger included, so denials are written
 * after their reply), `DENIALS` denied sends answered, then drained (written), then it says
 * so and waits to be killed.
 */
const WORKER = `
import { openStores } from "@tessera/sqlite";
import { createKernel } from "@tessera/core";
const stores = await openStores(process.env.TESSERA_URL);
const kernel = createKernel({
  grants: stores.grants,
  usage: stores.usage,
  audit: stores.audit,
  acts: stores.acts,
});
const turn = await kernel.openTurnAuthority({
  namespaceId: "ns", actor: "asker", authority: "host", owner: "alice", traceId: "t-1",
});
const n = Number(process.env.DENIALS);
const answers = [];
for (let i = 0; i < n; i++) {
  answers.push(turn.sendMessage({ recipient: "nobody", payload: "x", callId: "d-" + i }));
}
for (const answer of await Promise.all(answers)) {
  if (answer.status !== "denied") throw new Error("not denied: " + JSON.stringify(answer));
}
await kernel.drain();
process.stdout.write("written\\n");
setInterval(() => {}, 60_000);
`;
