/**
 * The audit hash chain against a real SQLite file: an attacker with the file drops the
 * append-only triggers and edits, deletes, inserts and reorders rows with SQL; the chain
 * read back through the sink shows each, at the right position. Rows written before the
 * chain (schema version 1) read back as the unchained start of their stream.
 */
import { verifyAuditChain } from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { auditEvent, describeAuditTamperCases } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { expect, it } from "vitest";
import { freshFile } from "./helpers.js";

describeAuditTamperCases("SQLite", async () => {
  const file = freshFile();
  const stores = await openStores(`sqlite:${file.path}`);
  const raw = new BetterSqlite3(file.path);
  raw.exec("DROP TRIGGER tessera_audit_no_update; DROP TRIGGER tessera_audit_no_delete;");
  // As an attacker would: the table's json_valid CHECK no longer stops text that is not JSON.
  raw.pragma("ignore_check_constraints = ON");
  // The row at a read position: `seq` is the table's append order, which reads follow.
  const rowAt = (index: number): number => {
    const rows = raw.prepare("SELECT seq FROM tessera_audit ORDER BY seq").all() as {
      seq: number;
    }[];
    const row = rows[index];
    if (row === undefined) throw new Error(`no row at ${index}`);
    return row.seq;
  };
  return {
    store: stores.audit,
    replace: async (index, json) => {
      raw.prepare("UPDATE tessera_audit SET event = ? WHERE seq = ?").run(json, rowAt(index));
    },
    remove: async (index) => {
      raw.prepare("DELETE FROM tessera_audit WHERE seq = ?").run(rowAt(index));
    },
    insertBefore: async (index, json) => {
      const seq = rowAt(index);
      // Moves every later row up by one (through negative numbers, as the key is unique).
      raw.transaction(() => {
        raw.prepare("UPDATE tessera_audit SET seq = -seq WHERE seq >= ?").run(seq);
        raw.prepare("UPDATE tessera_audit SET seq = 1 - seq WHERE seq < 0").run();
        const event = JSON.parse(json) as { callId: string; traceId: string };
        raw
          .prepare("INSERT INTO tessera_audit (seq, call_id, trace_id, event) VALUES (?, ?, ?, ?)")
          .run(seq, event.callId, event.traceId, json);
      })();
    },
    swap: async (index) => {
      const [a, b] = [rowAt(index), rowAt(index + 1)];
      raw.transaction(() => {
        raw.prepare("UPDATE tessera_audit SET seq = -1 WHERE seq = ?").run(a);
        raw.prepare("UPDATE tessera_audit SET seq = ? WHERE seq = ?").run(a, b);
        raw.prepare("UPDATE tessera_audit SET seq = ? WHERE seq = -1").run(b);
      })();
    },
    close: async () => {
      raw.close();
      await stores.close();
      file.dispose();
    },
  };
});

it("SQLite: rows written before the chain stay, as the unchained start of their stream", async () => {
  const file = freshFile();
  const stores = await openStores(`sqlite:${file.path}`);
  try {
    // As the version-1 sink wrote them: the event's JSON, no chain fields, no head row.
    const raw = new BetterSqlite3(file.path);
    const legacy = [0, 1, 2].map((i) => auditEvent(i, { namespaceId: "ns" }));
    for (const event of legacy) {
      raw
        .prepare("INSERT INTO tessera_audit (call_id, trace_id, event) VALUES (?, ?, ?)")
        .run(event.callId, event.traceId, JSON.stringify(event));
    }
    raw.close();
    for (let i = 3; i < 6; i++) await stores.audit.append(auditEvent(i, { namespaceId: "ns" }));
    const read = await stores.audit.read();
    expect(read.map((event) => event.seq)).toEqual([undefined, undefined, undefined, 1, 2, 3]);
    const verdict = verifyAuditChain(read);
    expect(verdict.ok).toBe(true);
    expect(verdict.streams).toEqual([
      expect.objectContaining({ stream: "ns", events: 6, unchained: 3 }),
    ]);
  } finally {
    await stores.close();
    file.dispose();
  }
});
