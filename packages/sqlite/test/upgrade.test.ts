/**
 * A file written by the previous release (schema version 3: claims without an answer column,
 * an audit trail linked by the v1 rule) opens with this code, migrates in place to version 4,
 * and keeps everything readable: its claims (settled and in doubt), its chain, which still
 * verifies, then verifies on with the v2 links the act ledger adds after it.
 */
import { type AuditEvent, verifyAuditChain } from "@tessera/core";
import { auditEventHash, GENESIS_HASH } from "@tessera/core/store-kit";
import { openStores, SCHEMA_VERSION } from "@tessera/sqlite";
import { actEvent, spendingAct } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { parseSqliteUrl } from "../src/config.js";
import { SqliteDatabase } from "../src/database.js";
import { migrate } from "../src/migrations.js";
import { freshFile } from "./helpers.js";

const PREVIOUS = 3;
const files: { dispose(): void }[] = [];
afterEach(() => {
  for (const made of files.splice(0)) made.dispose();
});

/** Two events linked as the previous release's sink linked them (rule v1), head moved. */
function writeV1Trail(raw: BetterSqlite3.Database): AuditEvent[] {
  let head = { seq: 0, hash: GENESIS_HASH };
  const written: AuditEvent[] = [];
  for (const callId of ["old-1", "old-2"]) {
    const content = actEvent(callId);
    const unhashed = { ...content, seq: head.seq + 1, prev: head.hash };
    const linked = { ...unhashed, hash: auditEventHash(unhashed as AuditEvent) };
    raw
      .prepare("INSERT INTO tessera_audit (call_id, trace_id, event) VALUES (?, ?, ?)")
      .run(callId, content.traceId, JSON.stringify(linked));
    head = { seq: linked.seq, hash: linked.hash };
    written.push(linked as AuditEvent);
  }
  raw
    .prepare("INSERT INTO tessera_audit_heads (stream, seq, hash) VALUES (?, ?, ?)")
    .run("ns-acts", head.seq, head.hash);
  return written;
}

describe("upgrading a file of the previous release", () => {
  it("opens, migrates to the answer column, and keeps old claims and the v1 chain verifiable", async () => {
    expect(SCHEMA_VERSION).toBe(PREVIOUS + 1);
    const file = freshFile();
    files.push(file);
    const url = `sqlite:${file.path}`;
    // The file as the previous release left it: its migrations only, then its rows.
    const old = SqliteDatabase.open(parseSqliteUrl(url), "store_unavailable");
    migrate(old, "store_unavailable", PREVIOUS);
    old.close();
    const raw = new BetterSqlite3(file.path);
    const columns = raw.prepare("SELECT name FROM pragma_table_info('tessera_claims')").all();
    expect(columns).not.toContainEqual({ name: "answer" });
    raw
      .prepare(
        `INSERT INTO tessera_claims (session, function_call_id, body_hash, claimed_at, worker,
           receipt_status, settled_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      )
      .run("s", "settled", "h1", 10, "w1", "dispatched", 11);
    raw
      .prepare(
        "INSERT INTO tessera_claims (session, function_call_id, body_hash, claimed_at) VALUES (?, ?, ?, ?)",
      )
      .run("s", "in-doubt", "h2", 20);
    const trail = writeV1Trail(raw);
    raw.close();

    const stores = await openStores(url);
    try {
      const { claims, audit, acts } = stores;
      expect(await claims.get({ session: "s", functionCallId: "settled" })).toEqual({
        session: "s",
        functionCallId: "settled",
        bodyHash: "h1",
        claimedAt: 10,
        worker: "w1",
        receipt: { status: "dispatched", settledAt: 11 },
      });
      expect(await claims.listInDoubt()).toEqual([
        { session: "s", functionCallId: "in-doubt", bodyHash: "h2", claimedAt: 20 },
      ]);
      // An old claim in doubt settles with an answer, which then reads back.
      const inDoubt = { session: "s", functionCallId: "in-doubt" };
      await claims.settle(inDoubt, { status: "failed", settledAt: 21 }, { error: "timeout" });
      expect((await claims.get(inDoubt))?.answer).toEqual({ error: "timeout" });
      // The old claim keeps its first outcome; a late settle adds no answer to it.
      await claims.settle(
        { session: "s", functionCallId: "settled" },
        { status: "failed", settledAt: 12 },
        1,
      );
      expect(await claims.get({ session: "s", functionCallId: "settled" })).not.toHaveProperty(
        "answer",
      );

      expect(await audit.read()).toEqual(trail);
      expect(verifyAuditChain(await audit.read())).toMatchObject({ ok: true });
      // New acts link after the old head with the v2 rule; the whole trail verifies.
      await Promise.all([acts.record(spendingAct("new-1")), acts.record(spendingAct("new-2"))]);
      const events = await audit.read();
      expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
      expect(events[2]?.prev).toBe(trail[1]?.hash);
      expect(verifyAuditChain(events)).toMatchObject({ ok: true });
    } finally {
      await stores.close();
    }
    const after = new BetterSqlite3(file.path);
    expect(
      after.prepare("SELECT version FROM tessera_schema_version ORDER BY version").all(),
    ).toEqual([{ version: 1 }, { version: 2 }, { version: 3 }, { version: 4 }]);
    after.close();
  });
});
