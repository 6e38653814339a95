/**
 * The audit table's index columns (`call_id`, `trace_id`) sit beside the hashed event, outside
 * the chain. An attacker with the file drops the append-only trigger and edits one of them to
 * hide a decision from `explain`: the paged read `tessera audit verify` walks reports the row
 * as `misindexed` at its seq, and reads by ID answer from the event's own fields, never the
 * column's.
 */
import {
  type AuditEvent,
  AuditTrailWalker,
  type AuditVerification,
  type ReadableAuditSink,
  readAuditPages,
  UnreadableAuditEvent,
  unreadableTrail,
} from "@tessera/core";
import { openStores } from "@tessera/sqlite";
import { auditEvent } from "@tessera/testkit";
import BetterSqlite3 from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { freshFile } from "./helpers.js";

/** The verdict as `tessera audit verify` reaches it: pages walked, a sink's finding its break. */
async function verifyByPages(store: ReadableAuditSink, pageSize = 2): Promise<AuditVerification> {
  const walker = new AuditTrailWalker();
  try {
    for await (const page of readAuditPages(store, { pageSize })) walker.push(page);
    return walker.result();
  } catch (error) {
    if (!(error instanceof UnreadableAuditEvent)) throw error;
    return unreadableTrail(error.position, error.misindexed);
  }
}

/** Six events in stream "ns" (seq 1–6), with the append-only triggers dropped on `raw`. */
async function tamperableTrail() {
  const file = freshFile();
  const stores = await openStores(`sqlite:${file.path}`);
  for (let i = 0; i < 6; i++) await stores.audit.append(auditEvent(i, { namespaceId: "ns" }));
  const raw = new BetterSqlite3(file.path);
  raw.exec("DROP TRIGGER tessera_audit_no_update");
  /** Sets `column` of the row whose event is `call-<index>`, as the auditor's repro did. */
  const setColumn = (column: "call_id" | "trace_id", index: number, value: string) => {
    raw
      .prepare(`UPDATE tessera_audit SET ${column} = ? WHERE json_extract(event, '$.callId') = ?`)
      .run(value, `call-${index}`);
  };
  return {
    audit: stores.audit,
    setColumn,
    close: async () => {
      raw.close();
      await stores.close();
      file.dispose();
    },
  };
}

const callIds = (events: readonly AuditEvent[]) => events.map((event) => event.callId);

describe("SQLite audit index columns", () => {
  it("an untampered trail verifies, and reads by call and trace ID find their events", async () => {
    const trail = await tamperableTrail();
    try {
      expect(await verifyByPages(trail.audit)).toMatchObject({ ok: true, events: 6 });
      expect(callIds(await trail.audit.read({ callId: "call-2" }))).toEqual(["call-2"]);
      expect(callIds(await trail.audit.read({ traceId: "trace-1" }))).toEqual(["call-1", "call-4"]);
    } finally {
      await trail.close();
    }
  });

  it("a call_id edited to another call: verify reports it at its seq; no read by ID shows it", async () => {
    const trail = await tamperableTrail();
    try {
      trail.setColumn("call_id", 2, "other");
      expect(await verifyByPages(trail.audit)).toMatchObject({
        ok: false,
        break: { kind: "misindexed", stream: "ns", index: 2, seq: 3 },
      });
      const verdict = await verifyByPages(trail.audit);
      if (!verdict.ok) expect(verdict.break.detail).toContain("call ID index disagrees");
      // The other call's read does not show call-2's decision under its name.
      expect(await trail.audit.read({ callId: "other" })).toEqual([]);
      expect(await trail.audit.read({ callId: "other", traceId: "trace-2" })).toEqual([]);
    } finally {
      await trail.close();
    }
  });

  it("another row's call_id set to a call: that call's read shows only its own event", async () => {
    const trail = await tamperableTrail();
    try {
      trail.setColumn("call_id", 4, "call-2");
      expect(await verifyByPages(trail.audit, 5000)).toMatchObject({
        ok: false,
        break: { kind: "misindexed", index: 4, seq: 5 },
      });
      expect(callIds(await trail.audit.read({ callId: "call-2" }))).toEqual(["call-2"]);
    } finally {
      await trail.close();
    }
  });

  it("a trace_id edited: verify reports it; the edited trace's read does not show it", async () => {
    const trail = await tamperableTrail();
    try {
      trail.setColumn("trace_id", 1, "trace-0");
      expect(await verifyByPages(trail.audit)).toMatchObject({
        ok: false,
        break: { kind: "misindexed", index: 1, seq: 2 },
      });
      const verdict = await verifyByPages(trail.audit);
      if (!verdict.ok) expect(verdict.break.detail).toContain("trace ID index disagrees");
      expect(callIds(await trail.audit.read({ traceId: "trace-0" }))).toEqual(["call-0", "call-3"]);
    } finally {
      await trail.close();
    }
  });
});
