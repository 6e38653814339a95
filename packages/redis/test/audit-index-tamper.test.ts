/**
 * The audit stream's index lists (`audit-call:<digest>`, `audit-trace:<digest>`, entry IDs in
 * stream order) sit beside the hashed events, outside the chain. An attacker with server
 * access renames or rewrites one to hide a decision from `explain`, as an auditor did: the
 * paged read `tessera audit verify` walks reports the event as `misindexed` at its seq, and
 * reads by ID answer from the event's own fields, never the list's.
 */
import type { AuditEvent } from "@tessera/core";
import { storageDigest } from "@tessera/core/store-kit";
import {
  auditEvent,
  describeAuditIndexCases,
  serviceUrl,
  verifyAuditByPages as verifyByPages,
} from "@tessera/testkit";
import { describe, expect, it } from "vitest";
import { compareEntryIds } from "../src/audit-index.js";
import { RedisAuditSink } from "../src/audit-sink.js";
import { parseRedisUrl } from "../src/config.js";
import { Connection } from "../src/connection.js";
import { admin, openTestStores, withParams } from "./support/redis-test-stores.js";

const url = serviceUrl("TESSERA_REDIS_URL");

/** `count` events in stream "ns" (seq 1…) under a private prefix. */
async function tamperableTrail(base: string, count = 6) {
  const opened = await openTestStores(base);
  for (let i = 0; i < count; i++) {
    await opened.stores.audit.append(auditEvent(i, { namespaceId: "ns" }));
  }
  const callList = (callId: string) => `${opened.prefix}audit-call:${storageDigest(callId)}`;
  const traceList = (traceId: string) => `${opened.prefix}audit-trace:${storageDigest(traceId)}`;
  const entryIds = () =>
    admin(base, async (redis) =>
      (await redis.xrange(`${opened.prefix}audit`, "-", "+")).map(([id]) => id),
    );
  return {
    audit: opened.stores.audit,
    callList,
    traceList,
    entryIds,
    directUrl: opened.directUrl,
    redis: <T>(work: Parameters<typeof admin<T>>[1]) => admin(base, work),
    close: () => opened.close(),
  };
}

const callIds = (events: readonly AuditEvent[]) => events.map((event) => event.callId);

if (url) {
  describeAuditIndexCases("Redis lists", async () => {
    const trail = await tamperableTrail(url, 0);
    return {
      store: trail.audit,
      // The event's entry ID taken off its own list and put on the other's, in entry order
      // (the lists stay sorted, as the writers keep them).
      refile: async (index, event, id) => {
        const listOf = index === "call" ? trail.callList : trail.traceList;
        const [found] = await trail.audit.read({ callId: `call-${event}` });
        const own = index === "call" ? `call-${event}` : (found?.traceId as string);
        const entry = (await trail.entryIds())[event] as string;
        await trail.redis(async (redis) => {
          await redis.lrem(listOf(own), 0, entry);
          const entries = [...(await redis.lrange(listOf(id), 0, -1)), entry];
          entries.sort((a, b) => compareEntryIds(a, b) ?? 0);
          await redis.del(listOf(id));
          await redis.rpush(listOf(id), ...entries);
        });
      },
      close: trail.close,
    };
  });
}

describe("stream entry IDs in order", () => {
  it("compares as numbers of any length, and refuses what is not an entry ID", () => {
    expect(compareEntryIds("9-0", "10-0")).toBeLessThan(0);
    expect(compareEntryIds("10-2", "10-10")).toBeLessThan(0);
    expect(compareEntryIds("1733370000000-1", "1733370000000-1")).toBe(0);
    expect(compareEntryIds("1733370000001-0", "1733370000000-7")).toBeGreaterThan(0);
    expect(compareEntryIds("junk", "1-0")).toBeUndefined();
  });
});

if (url) {
  describe("Redis audit index lists, beyond the shared cases", () => {
    it("a long trace's list is searched, not scanned: LINDEX about log2 of its length per event", async () => {
      // Three traces of 100 events each, every call its own list of one.
      const trail = await tamperableTrail(url, 300);
      const connection = new Connection(
        parseRedisUrl(withParams(trail.directUrl, { commandTimeoutMs: "20000" })),
      );
      try {
        await connection.connect("audit_unavailable");
        const sink = new RedisAuditSink(connection);
        connection.sent.reset();
        expect(await verifyByPages(sink, 64)).toMatchObject({ ok: true, events: 300 });
        // Per event: one probe of its call's list, at most 7 of its trace's (2^7 > 100).
        expect(connection.sent.of("lindex")).toBeLessThanOrEqual(300 * (1 + 7));
        expect(connection.sent.of("lpos") + connection.sent.of("lrange")).toBe(0);
      } finally {
        await connection.close();
        await trail.close();
      }
    });

    it("an ID pushed onto another call's list: that call's read shows only its own event", async () => {
      const trail = await tamperableTrail(url);
      try {
        const ids = await trail.entryIds();
        await trail.redis((redis) => redis.rpush(trail.callList("call-2"), ids[4] as string));
        expect(callIds(await trail.audit.read({ callId: "call-2" }))).toEqual(["call-2"]);
      } finally {
        await trail.close();
      }
    });

    it("an entry of a trace's list overwritten (LSET): verify reports it; the trace's read does not show the other", async () => {
      const trail = await tamperableTrail(url);
      try {
        const ids = await trail.entryIds();
        // trace-1 lists call-1 and call-4; call-4's entry now points at call-3's (trace-0).
        await trail.redis((redis) => redis.lset(trail.traceList("trace-1"), 1, ids[3] as string));
        const verdict = await verifyByPages(trail.audit, 5000);
        expect(verdict).toMatchObject({
          ok: false,
          break: { kind: "misindexed", index: 4, seq: 5 },
        });
        if (!verdict.ok) expect(verdict.break.detail).toContain("trace ID index disagrees");
        expect(callIds(await trail.audit.read({ traceId: "trace-1" }))).toEqual(["call-1"]);
      } finally {
        await trail.close();
      }
    });

    it("a list written over with text that is no entry ID: verify reports the event it held", async () => {
      const trail = await tamperableTrail(url);
      try {
        await trail.redis((redis) => redis.lset(trail.callList("call-0"), 0, "junk"));
        expect(await verifyByPages(trail.audit)).toMatchObject({
          ok: false,
          break: { kind: "misindexed", index: 0, seq: 1 },
        });
      } finally {
        await trail.close();
      }
    });
  });
} else {
  describe("Redis audit index lists", () => {
    it.skip("skipped: TESSERA_REDIS_URL is not set", () => {});
  });
}
