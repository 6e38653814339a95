/**
 * The audit table's index columns (`call_key`, `trace_key`: digests of the call and trace IDs)
 * sit beside the hashed event, outside the chain. An attacker with SQL access disables the
 * append-only trigger and edits one of them to hide a decision from `explain`, as an auditor
 * did: the paged read `tessera audit verify` walks reports the row as `misindexed` at its seq,
 * and reads by ID answer from the event's own fields, never the column's.
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
import { storageDigest } from "@tessera/core/store-kit";
import { auditEvent, serviceUrl } from "@tessera/testkit";
import { describe, expect, it } from "vitest";
import { admin, openTestStores } from "./support/pg-test-stores.js";

const url = serviceUrl("TESSERA_PG_URL");

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

/** Six events in stream "ns" (seq 1–6) in a private schema. */
async function tamperableTrail(base: string) {
  const opened = await openTestStores(base);
  for (let i = 0; i < 6; i++) {
    await opened.stores.audit.append(auditEvent(i, { namespaceId: "ns" }));
  }
  const audit = `"${opened.schema}".audit`;
  /**
   * Sets `column` of the row whose event is `call-<index>` to the digest of `id`, as every
   * writer files an ID, with the append-only trigger disabled for the statement.
   */
  const setColumn = async (column: "call_key" | "trace_key", index: number, id: string) => {
    await admin(
      base,
      `BEGIN;
       ALTER TABLE ${audit} DISABLE TRIGGER audit_no_change;
       UPDATE ${audit} SET ${column} = '${storageDigest(id)}'
         WHERE event::jsonb->>'callId' = 'call-${index}';
       ALTER TABLE ${audit} ENABLE TRIGGER audit_no_change;
       COMMIT`,
    );
  };
  return { audit: opened.stores.audit, setColumn, close: () => opened.close() };
}

const callIds = (events: readonly AuditEvent[]) => events.map((event) => event.callId);

if (url) {
  describe("PostgreSQL audit index columns", () => {
    it("an untampered trail verifies, and reads by call and trace ID find their events", async () => {
      const trail = await tamperableTrail(url);
      try {
        expect(await verifyByPages(trail.audit)).toMatchObject({ ok: true, events: 6 });
        expect(callIds(await trail.audit.read({ callId: "call-2" }))).toEqual(["call-2"]);
        expect(callIds(await trail.audit.read({ traceId: "trace-1" }))).toEqual([
          "call-1",
          "call-4",
        ]);
      } finally {
        await trail.close();
      }
    });

    it("a call_key edited to another call's: verify reports it at its seq; no read by ID shows it", async () => {
      const trail = await tamperableTrail(url);
      try {
        await trail.setColumn("call_key", 2, "other");
        const verdict = await verifyByPages(trail.audit);
        expect(verdict).toMatchObject({
          ok: false,
          break: { kind: "misindexed", stream: "ns", index: 2, seq: 3 },
        });
        if (!verdict.ok) expect(verdict.break.detail).toContain("call ID index disagrees");
        expect(await trail.audit.read({ callId: "other" })).toEqual([]);
        expect(await trail.audit.read({ callId: "other", traceId: "trace-2" })).toEqual([]);
      } finally {
        await trail.close();
      }
    });

    it("another row's call_key set to a call's: that call's read shows only its own event", async () => {
      const trail = await tamperableTrail(url);
      try {
        await trail.setColumn("call_key", 4, "call-2");
        expect(await verifyByPages(trail.audit, 5000)).toMatchObject({
          ok: false,
          break: { kind: "misindexed", index: 4, seq: 5 },
        });
        expect(callIds(await trail.audit.read({ callId: "call-2" }))).toEqual(["call-2"]);
      } finally {
        await trail.close();
      }
    });

    it("a trace_key edited: verify reports it; the edited trace's read does not show it", async () => {
      const trail = await tamperableTrail(url);
      try {
        await trail.setColumn("trace_key", 1, "trace-0");
        const verdict = await verifyByPages(trail.audit);
        expect(verdict).toMatchObject({
          ok: false,
          break: { kind: "misindexed", index: 1, seq: 2 },
        });
        if (!verdict.ok) expect(verdict.break.detail).toContain("trace ID index disagrees");
        expect(callIds(await trail.audit.read({ traceId: "trace-0" }))).toEqual([
          "call-0",
          "call-3",
        ]);
      } finally {
        await trail.close();
      }
    });
  });
} else {
  describe("PostgreSQL audit index columns", () => {
    it.skip("skipped: TESSERA_PG_URL is not set", () => {});
  });
}
