import {
  type AuditEvent,
  AuditTrailWalker,
  type AuditVerification,
  type ReadableAuditSink,
  readAuditPages,
  UnreadableAuditEvent,
  unreadableTrail,
} from "@tessera/core";
import { describe, expect, it } from "vitest";
import { auditEvent } from "./audit-fixtures.js";

/**
 * A sink's trail as an attacker holding the store reaches its index: the call and trace index
 * a store keeps beside each event (SQLite's columns, PostgreSQL's digest columns, Redis's
 * lists), outside the hash chain. The trail holds six events in stream "ns", `call-0` …
 * `call-5`; `auditEvent` puts event `i` in trace `trace-<i % 3>`.
 */
export interface IndexTamperableTrail {
  readonly store: ReadableAuditSink;
  /**
   * Files the event `call-<event>` under the call (or trace) ID `id` in that index instead of
   * under its own, as an edit of the index alone would.
   */
  refile(index: "call" | "trace", event: number, id: string): Promise<void>;
  close(): Promise<void>;
}

/** The verdict as `tessera audit verify` reaches it: pages walked, a sink's finding its break. */
export async function verifyAuditByPages(
  store: ReadableAuditSink,
  pageSize = 2,
): Promise<AuditVerification> {
  const walker = new AuditTrailWalker();
  try {
    for await (const page of readAuditPages(store, { pageSize })) walker.push(page);
    return walker.result();
  } catch (error) {
    if (!(error instanceof UnreadableAuditEvent)) throw error;
    return unreadableTrail(error.position, error.misindexed);
  }
}

const callIds = (events: readonly AuditEvent[]) => events.map((event) => event.callId);

/**
 * An edited index never hides a decision quietly: the paged read `audit verify` walks reports
 * the event as `misindexed` at its index and seq, and a read by call or trace ID answers from
 * the event's own fields, so no event shows under an ID it does not carry.
 */
export function describeAuditIndexCases(
  name: string,
  open: () => Promise<IndexTamperableTrail>,
): void {
  async function withTrail(work: (trail: IndexTamperableTrail) => Promise<void>): Promise<void> {
    const trail = await open();
    try {
      for (let i = 0; i < 6; i++) await trail.store.append(auditEvent(i, { namespaceId: "ns" }));
      await work(trail);
    } finally {
      await trail.close();
    }
  }

  describe(`audit index: ${name}`, () => {
    it("an untampered trail verifies, and reads by call and trace ID find their events", () =>
      withTrail(async ({ store }) => {
        expect(await verifyAuditByPages(store)).toMatchObject({ ok: true, events: 6 });
        expect(callIds(await store.read({ callId: "call-2" }))).toEqual(["call-2"]);
        expect(callIds(await store.read({ traceId: "trace-1" }))).toEqual(["call-1", "call-4"]);
      }));

    it("an event filed under another call ID: reported at its seq; no read by ID shows it", () =>
      withTrail(async ({ store, refile }) => {
        await refile("call", 2, "other");
        const verdict = await verifyAuditByPages(store);
        expect(verdict).toMatchObject({
          ok: false,
          break: { kind: "misindexed", stream: "ns", index: 2, seq: 3 },
        });
        if (!verdict.ok) expect(verdict.break.detail).toContain("call ID index disagrees");
        expect(await store.read({ callId: "other" })).toEqual([]);
        expect(await store.read({ callId: "other", traceId: "trace-2" })).toEqual([]);
      }));

    it("an event filed under a real call's ID: that call's read shows only its own event", () =>
      withTrail(async ({ store, refile }) => {
        await refile("call", 4, "call-2");
        expect(await verifyAuditByPages(store, 5000)).toMatchObject({
          ok: false,
          break: { kind: "misindexed", index: 4, seq: 5 },
        });
        expect(callIds(await store.read({ callId: "call-2" }))).toEqual(["call-2"]);
      }));

    it("an event filed under another trace: reported; that trace's read does not show it", () =>
      withTrail(async ({ store, refile }) => {
        await refile("trace", 1, "trace-0");
        const verdict = await verifyAuditByPages(store);
        expect(verdict).toMatchObject({
          ok: false,
          break: { kind: "misindexed", index: 1, seq: 2 },
        });
        if (!verdict.ok) expect(verdict.break.detail).toContain("trace ID index disagrees");
        expect(callIds(await store.read({ traceId: "trace-0" }))).toEqual(["call-0", "call-3"]);
      }));
  });
}
